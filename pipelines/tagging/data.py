"""Tagging examples: readers for MathKnowCT-style JSONL/CSV files and the demonstration split.

A row pairs a knowledge definition ``k`` with a question ``q`` and a label ``y`` (1: q tests k).
Column names are mapped from params (``fields``), labels are read through ``positive_labels``
and ``negative_labels``, so other files work without code, e.g. MathFish's CSV::

    fields: {definition: standard_description, question: text, label: aligns, id: id,
             knowledge_id: null, language: null}

A missing ``knowledge_id`` column gives each distinct definition an id ``k-<sha1[:8]>``.
A row whose label cannot be read is skipped, counted and logged (rows are forgiving).
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pipelines.config import StrictModel

log = logging.getLogger(__name__)


class FieldMap(StrictModel):
    """Which column holds what; ``null`` for an optional column the file lacks."""

    definition: str = "definition"
    question: str = "question"
    label: str = "label"
    id: str | None = "id"
    knowledge_id: str | None = "knowledge_id"
    language: str | None = "language"
    rationale: str | None = "rationale"


class TaggingDataConfig(StrictModel):
    """Where the labelled pairs are and how to read them."""

    path: str = "data/tagging/demo.jsonl"
    format: Literal["auto", "jsonl", "csv"] = "auto"
    fields: FieldMap = FieldMap()
    positive_labels: list[str] = ["1", "yes", "true", "y", "是"]
    negative_labels: list[str] = ["0", "no", "false", "n", "否"]
    default_language: Literal["en", "zh"] = "en"
    languages: list[Literal["en", "zh"]] | None = None
    knowledge_ids: list[str] | None = None
    limit: int | None = Field(None, ge=1)  # null = every pair; 0 or less would evaluate nothing
    seed: int = 0


@dataclass
class TaggingExample:
    """One (knowledge definition, question, label) pair."""

    id: str
    knowledge_id: str
    definition: str
    question: str
    label: int
    language: str = "en"
    rationale: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def concept(self) -> tuple[str, str]:
        """Demonstrations are chosen per (knowledge id, language)."""
        return (self.knowledge_id, self.language)


def _raw_rows(path: Path, fmt: str) -> list[dict[str, Any]]:
    fmt = fmt if fmt != "auto" else ("csv" if path.suffix.lower() in (".csv", ".tsv") else "jsonl")
    if fmt == "csv":
        with open(path, encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle, delimiter="\t" if path.suffix.lower() == ".tsv" else ","))
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    log.warning("%s:%d: not valid JSON, skipped", path, number)
    return rows


def _label(value: Any, cfg: TaggingDataConfig) -> int | None:
    text = str(value).strip().lower()
    if text in {v.lower() for v in cfg.positive_labels}:
        return 1
    if text in {v.lower() for v in cfg.negative_labels}:
        return 0
    return None


def read_examples(cfg: TaggingDataConfig, root: Path | str = ".") -> list[TaggingExample]:
    """All readable rows of ``cfg.path`` (relative to ``root``), filtered by language."""
    path = Path(root) / cfg.path
    if not path.exists():
        raise FileNotFoundError(f"{path}: tagging data not found; set tagging.data.path in params.yaml")
    f = cfg.fields
    examples, skipped = [], 0
    for number, row in enumerate(_raw_rows(path, cfg.format), start=1):
        try:
            definition, question = str(row[f.definition]).strip(), str(row[f.question]).strip()
            label = _label(row[f.label], cfg)
        except KeyError as exc:
            raise ValueError(f"{path}: row {number} has no column {exc}; fix tagging.data.fields") from None
        if label is None or not definition or not question:
            skipped += 1
            continue
        kid = row.get(f.knowledge_id) if f.knowledge_id else None
        kid = str(kid) if kid not in (None, "") else "k-" + hashlib.sha1(definition.encode()).hexdigest()[:8]
        language = (row.get(f.language) if f.language else None) or cfg.default_language
        examples.append(
            TaggingExample(
                id=str(row.get(f.id) if f.id and row.get(f.id) not in (None, "") else f"row-{number}"),
                knowledge_id=kid,
                definition=definition,
                question=question,
                label=label,
                language=str(language),
                rationale=(row.get(f.rationale) or None) if f.rationale else None,
                meta=row.get("meta") if isinstance(row.get("meta"), dict) else {},
            )
        )
    if skipped:
        log.warning("%s: %d rows without a readable label/definition/question were skipped", path, skipped)
    if cfg.languages:
        examples = [e for e in examples if e.language in cfg.languages]
    if cfg.knowledge_ids:
        examples = [e for e in examples if e.knowledge_id in cfg.knowledge_ids]
    return examples


class DemoConfig(StrictModel):
    """Demonstrations: ``pool_per_concept`` rows per (knowledge id, language) are held out (never
    evaluated); ``k`` of them are shown to the LLM agents, chosen at random (seeded) or as the
    nearest to the definition by sentence embedding (alternating labels when both exist)."""

    pool_per_concept: int = 3
    k: int = 2
    strategy: Literal["random", "nearest"] = "random"
    embedding_model: str = "models/base/all-minilm-l6-v2"
    seed: int = 0


def _balanced_pool(rows: list[TaggingExample], size: int, rng: random.Random) -> list[TaggingExample]:
    """Up to ``size`` rows alternating labels (positive first) so both labels are shown."""
    by_label = {1: [r for r in rows if r.label == 1], 0: [r for r in rows if r.label == 0]}
    for group in by_label.values():
        rng.shuffle(group)
    out: list[TaggingExample] = []
    while len(out) < size and (by_label[1] or by_label[0]):
        for label in (1, 0):
            if by_label[label] and len(out) < size:
                out.append(by_label[label].pop())
    return out


def split_demonstrations(
    examples: list[TaggingExample], cfg: DemoConfig, embed: Any = None
) -> tuple[
    dict[tuple[str, str], list[TaggingExample]], list[TaggingExample], dict[tuple[str, str], list[TaggingExample]]
]:
    """Hold out a pool per concept; returns (shown demonstrations, evaluation rows, pools).

    ``embed(list[str]) -> array`` is needed for ``strategy: nearest``. The pools are also what
    the trained baselines (embedding threshold, PLM) learn from.
    """
    rng = random.Random(cfg.seed)
    by_concept: dict[tuple[str, str], list[TaggingExample]] = defaultdict(list)
    for example in examples:
        by_concept[example.concept].append(example)
    pools, shown = {}, {}
    for concept in sorted(by_concept):
        pools[concept] = _balanced_pool(by_concept[concept], cfg.pool_per_concept, rng)
        if cfg.strategy == "nearest" and pools[concept]:
            import numpy as np

            vectors = np.asarray(embed([pools[concept][0].definition] + [p.question for p in pools[concept]]))
            scores = (
                vectors[1:] @ vectors[0] / (np.linalg.norm(vectors[1:], axis=1) * np.linalg.norm(vectors[0]) + 1e-9)
            )
            ranked = [pools[concept][i] for i in np.argsort(-scores, kind="stable")]
            pos, neg = [r for r in ranked if r.label == 1], [r for r in ranked if r.label == 0]
            order = [r for pair in zip(pos, neg, strict=False) for r in pair] + pos[len(neg) :] + neg[len(pos) :]
            shown[concept] = order[: cfg.k]
        else:
            shown[concept] = pools[concept][: cfg.k]
    held = {e.id for pool in pools.values() for e in pool}
    evaluation = [e for e in examples if e.id not in held]
    return shown, evaluation, pools


def limit_examples(examples: list[TaggingExample], limit: int | None, seed: int) -> list[TaggingExample]:
    """A seeded sample of ``limit`` rows, spread over concepts and labels (all rows if None)."""
    if limit is None or limit >= len(examples):
        return examples
    rng = random.Random(seed)
    groups: dict[tuple, list[TaggingExample]] = defaultdict(list)
    for example in examples:
        groups[(example.knowledge_id, example.language, example.label)].append(example)
    for rows in groups.values():
        rng.shuffle(rows)
    picked: list[TaggingExample] = []
    # round r gives knowledge id i the (language, label) pair (i + r) mod n: a small limit still
    # covers every concept, both labels and both languages
    preferred = [("en", 1), ("zh", 0), ("en", 0), ("zh", 1)]
    combos = sorted({(k[1], k[2]) for k in groups}, key=lambda c: (preferred.index(c) if c in preferred else 4, c))
    kids = sorted({k[0] for k in groups})
    keys = [
        (kid, *combos[(i + r) % len(combos)])
        for r in range(len(combos))
        for i, kid in enumerate(kids)
        if (kid, *combos[(i + r) % len(combos)]) in groups
    ]
    while len(picked) < limit:
        for key in keys:
            if groups[key] and len(picked) < limit:
                picked.append(groups[key].pop())
    order = {e.id: i for i, e in enumerate(examples)}
    return sorted(picked, key=lambda e: order[e.id])
