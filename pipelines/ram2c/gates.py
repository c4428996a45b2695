"""Quality gates on (prompt, chosen, rejected) pairs, each drop counted by its reason.

Reasons, checked in this order (the first that applies is recorded):
``empty_chosen``, ``empty_rejected``, ``same`` (chosen equals rejected after whitespace/case
normalisation), ``wrong_language_chosen`` / ``wrong_language_rejected`` (share of characters of
the dialogue's script below ``min_language_share``), ``too_long_chosen`` / ``too_long_rejected``
(more than ``max_chars`` of the language), ``names_experts`` (the chosen reply mentions experts,
documents, references or an expert persona's name).
"""

from __future__ import annotations

import re
from collections import Counter

from pipelines.ram2c.config import GateConfig
from pipelines.ram2c.scenario import load_scenario
from pipelines.ram2c.topics import mentions

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
LATIN = re.compile(r"[A-Za-z]")


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def language_share(text: str, language: str) -> float:
    """Share of letters in ``text`` written in the script of ``language`` (CJK for zh, Latin for en)."""
    cjk, latin = len(CJK.findall(text)), len(LATIN.findall(text))
    letters = cjk + latin
    if letters == 0:
        return 0.0
    return (cjk if language == "zh" else latin) / letters


def expert_words(language: str) -> list[str]:
    """Words of experts and documents, and every expert persona's name, in ``language``."""
    scenario = load_scenario()
    names = [p["name"][language] for group in scenario["experts"].values() for p in group]
    return list(scenario["expert_terms"][language]) + names


def gate_reason(chosen: str, rejected: str, language: str, cfg: GateConfig) -> str | None:
    """Why a pair is dropped, or None to keep it."""
    for side, text in (("chosen", chosen), ("rejected", rejected)):
        if not text or not text.strip():
            return f"empty_{side}"
    if normalise(chosen) == normalise(rejected):
        return "same"
    for side, text in (("chosen", chosen), ("rejected", rejected)):
        if language_share(text, language) < cfg.min_language_share:
            return f"wrong_language_{side}"
    for side, text in (("chosen", chosen), ("rejected", rejected)):
        if len(text) > cfg.max_chars[language]:
            return f"too_long_{side}"
    if mentions(chosen, expert_words(language)):
        return "names_experts"
    return None


def apply_gates(pairs: list[dict], cfg: GateConfig) -> tuple[list[dict], list[dict], dict[str, int]]:
    """Split pairs (each with ``chosen``, ``rejected``, ``language`` text fields) into kept and
    dropped (with ``reason``); returns (kept, dropped, counts by reason)."""
    kept, dropped, counts = [], [], Counter()
    for pair in pairs:
        reason = gate_reason(pair["chosen"], pair["rejected"], pair["language"], cfg)
        if reason is None:
            kept.append(pair)
        else:
            counts[reason] += 1
            dropped.append({**pair, "reason": reason})
    return kept, dropped, dict(sorted(counts.items()))
