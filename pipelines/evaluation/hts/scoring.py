"""HTS scores on the RAM2C paper's scale: better / equal / worse = 4 / 2 / 0 points, summed
over a dimension's judgments and normalised to 0-100, so 50 means parity with the baseline,
above 50 the system under test is preferred and below 50 the baseline is.

``hts_scores`` is the one summary the LLM judges and the imported human ratings share: per
dimension the score, its outcome counts, unscored (failed) judgments, a bootstrap interval
over items (none for fewer than ``min_items`` items: ``"ci_note": "n too small"``) and Fleiss'
kappa over the judges. ``position_preference`` is each judge's share of first-position picks,
flagged above ``POSITION_FLAG`` (one position for more than 80% of its decisions).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pipelines.evaluation.stats.agreement import kappa_by_dimension
from pipelines.evaluation.stats.bootstrap import TOO_FEW, bootstrap_interval

POINTS = {"better": 4, "equal": 2, "worse": 0}
POSITION_FLAG = 0.8
"""A judge that picked one position (first or second) for more than this share of its A/B decisions is flagged."""


def hts_score(outcomes: Iterable[str | None]) -> float | None:
    """``100 * points / (4 * n)`` over the scored outcomes (None ones skipped); None if there are none."""
    scored = [o for o in outcomes if o is not None]
    unknown = set(scored) - set(POINTS)
    if unknown:
        raise ValueError(f"unknown outcomes {sorted(unknown)}; expected better, equal or worse")
    if not scored:
        return None
    return 100.0 * sum(POINTS[o] for o in scored) / (4 * len(scored))


def _items_score(items: Sequence[list[str]]) -> float:
    score = hts_score(o for outcomes in items for o in outcomes)
    return 50.0 if score is None else score


def hts_scores(
    judgments: Iterable[Any],
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    min_items: int = 1,
) -> dict[str, dict[str, Any]]:
    """Per dimension: ``{"score", "n", "items", "failed", "better", "equal", "worse", "ci",
    "ci_note", "kappa", "kappa_items", "raters"}``.

    ``judgments`` have ``item_id``, ``dimension``, ``judge`` and ``outcome`` (None = unscored);
    the interval resamples items, each with all its judges' outcomes (seeded); with fewer than
    ``min_items`` scored items there is none (``ci`` None, ``ci_note`` "n too small").
    """
    judgments = list(judgments)
    by_dimension: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    failed: dict[str, int] = defaultdict(int)
    for j in judgments:
        if j.outcome is None:
            failed[j.dimension] += 1
            by_dimension[j.dimension]  # the dimension exists even if nothing was scored
        else:
            by_dimension[j.dimension][j.item_id].append(j.outcome)
    kappas = kappa_by_dimension(judgments)
    summary: dict[str, dict[str, Any]] = {}
    for dimension, by_item in by_dimension.items():
        outcomes = [o for values in by_item.values() for o in values]
        items = list(by_item.values())
        enough = bool(items) and len(items) >= min_items
        ci = (
            bootstrap_interval(items, _items_score, resamples=resamples, seed=seed, confidence=confidence)
            if enough
            else None
        )
        agreement = kappas.get(dimension, {})
        summary[dimension] = {
            "score": hts_score(outcomes),
            "n": len(outcomes),
            "items": len(items),
            "failed": failed[dimension],
            **{name: outcomes.count(name) for name in POINTS},
            "ci": ci,
            "ci_note": None if enough or not items else TOO_FEW,
            "kappa": agreement.get("kappa"),
            "kappa_items": agreement.get("items", 0),
            "raters": agreement.get("raters", 0),
        }
    return summary


def position_preference(judgments: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per judge: how often it chose the reply shown first (``A``), second (``B``) or ``equal``,
    ``first_share`` = A / (A + B) and ``flagged`` (one position in more than ``POSITION_FLAG`` of
    its A/B decisions). Positions are balanced, so a fair judge's share is near 0.5 whatever the
    systems; a share near 0 or 1 is position bias, not preference."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"A": 0, "B": 0, "equal": 0})
    for j in judgments:
        if j.choice in ("A", "B", "equal"):
            counts[j.judge][j.choice] += 1
    out = {}
    for judge, c in counts.items():
        share = c["A"] / (c["A"] + c["B"]) if c["A"] + c["B"] else None
        flagged = share is not None and max(share, 1 - share) > POSITION_FLAG
        out[judge] = {**c, "first_share": share, "flagged": flagged}
    return out
