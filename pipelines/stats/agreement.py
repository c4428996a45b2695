"""Inter-rater agreement: Fleiss' kappa (statsmodels) over the judges of each HTS dimension.

Every judge (an LLM judge or a human rater) is one rater; each item is one subject; the
categories are the outcomes ``better`` / ``equal`` / ``worse`` of the model under test. Fleiss'
kappa needs the same number of raters per subject, so only items rated (with a parsed verdict)
by the most common number of raters count; how many did is reported.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

CATEGORIES: tuple[str, ...] = ("better", "equal", "worse")


def fleiss_kappa_of(ratings: Sequence[Sequence[str]], categories: Sequence[str] = CATEGORIES) -> float | None:
    """Fleiss' kappa of ``ratings[item][rater]`` (category names); None when undefined
    (fewer than two raters or items, or every rating in one category)."""
    if len({len(r) for r in ratings}) > 1:
        raise ValueError("Fleiss' kappa needs the same number of ratings for every item")
    if len(ratings) < 2 or len(ratings[0]) < 2:
        return None
    index = {c: i for i, c in enumerate(categories)}
    unknown = {x for row in ratings for x in row} - set(index)
    if unknown:
        raise ValueError(f"unknown categories {sorted(unknown)}; expected {list(categories)}")
    data = np.array([[index[x] for x in row] for row in ratings])
    table, _ = aggregate_raters(data, n_cat=len(categories))
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = float(fleiss_kappa(table, method="fleiss"))
    return None if math.isnan(kappa) or math.isinf(kappa) else kappa


def kappa_by_dimension(judgments: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """``{dimension: {"kappa", "items", "raters", "items_left_out"}}`` from judgments with
    ``item_id``, ``dimension``, ``judge`` and ``outcome`` (None = not rated) attributes."""
    ratings: dict[str, dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for j in judgments:
        if j.outcome is not None:
            ratings[j.dimension][j.item_id][j.judge] = j.outcome
    result: dict[str, dict[str, Any]] = {}
    for dimension, by_item in ratings.items():
        counts = Counter(len(r) for r in by_item.values())
        raters = max(counts, key=lambda k: (counts[k], k))
        rows = [list(r.values()) for r in by_item.values() if len(r) == raters]
        result[dimension] = {
            "kappa": fleiss_kappa_of(rows),
            "items": len(rows),
            "raters": raters,
            "items_left_out": len(by_item) - len(rows),
        }
    return result
