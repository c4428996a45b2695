"""Seeded percentile-bootstrap intervals, for tuned-vs-base deltas of any per-item metric.

Items are resampled with replacement; for a paired comparison the same resampled items are used
for both systems, so the interval reflects the item-to-item variation of the *difference*.

    paired_delta(tuned_f1_per_item, base_f1_per_item, resamples=1000, seed=0)
    # {"n": 100, "tuned": 0.61, "base": 0.52, "delta": 0.09, "ci": [0.04, 0.14], "confidence": 0.95, ...}

With fewer than ``min_items`` items no interval is computed: ``ci`` is None and ``ci_note`` says
"n too small" (a table then prints that, never an interval spanning one or two items).

A metric that is not a mean of per-item values (micro F1, an HTS score) passes ``statistic``:
a function of the list of resampled items (each item may be any value, e.g. a (gold, predicted)
pair or the list of one item's judgments).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")
TOO_FEW = "n too small"


def resample_indices(n: int, *, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n)`` item indices drawn with replacement from ``numpy.random.default_rng(seed)``."""
    if n < 1:
        raise ValueError("bootstrap needs at least one item")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def percentile_interval(estimates: np.ndarray, confidence: float) -> list[float]:
    """The central ``confidence`` share of bootstrap estimates, as ``[low, high]``."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return [float(low), float(high)]


def bootstrap_interval(
    items: Sequence[T],
    statistic: Callable[[list[T]], float] | None = None,
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[float]:
    """Interval of ``statistic`` (default: the mean of numeric items) over resampled items."""
    indices = resample_indices(len(items), resamples=resamples, seed=seed)
    if statistic is None:
        values = np.asarray(items, dtype=float)
        return percentile_interval(values[indices].mean(axis=1), confidence)
    estimates = np.array([statistic([items[i] for i in row]) for row in indices], dtype=float)
    return percentile_interval(estimates, confidence)


def _aligned(tuned: Sequence | Mapping, base: Sequence | Mapping) -> tuple[list, list, list]:
    if isinstance(tuned, Mapping) != isinstance(base, Mapping):
        raise TypeError("tuned and base must both be sequences or both be mappings of item id -> value")
    if isinstance(tuned, Mapping):
        missing = sorted(set(tuned) ^ set(base))
        if missing:
            raise ValueError(f"tuned and base must cover the same items; only in one: {missing[:5]}")
        ids = sorted(tuned)
        return ids, [tuned[i] for i in ids], [base[i] for i in ids]
    if len(tuned) != len(base):
        raise ValueError(f"paired values need equal lengths, got {len(tuned)} and {len(base)}")
    return list(range(len(tuned))), list(tuned), list(base)


def paired_delta(
    tuned: Sequence | Mapping,
    base: Sequence | Mapping,
    *,
    statistic: Callable[[list], float] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    min_items: int = 1,
) -> dict[str, Any]:
    """``tuned - base`` of ``statistic`` (default: mean) with a paired bootstrap interval.

    ``tuned`` and ``base`` are per-item values aligned by position, or mappings item id -> value
    with the same ids. Returns ``{"n", "tuned", "base", "delta", "ci": [low, high] (None below
    ``min_items`` items), "ci_note", "confidence", "resamples", "seed", "min_items"}``.
    """
    _, t, b = _aligned(tuned, base)
    stat = statistic or (lambda values: float(np.mean(np.asarray(values, dtype=float))))
    pairs = list(zip(t, b, strict=True))
    if len(pairs) < min_items:
        ci = None
    elif statistic is None:
        differences = np.asarray(t, dtype=float) - np.asarray(b, dtype=float)
        ci = bootstrap_interval(differences, resamples=resamples, seed=seed, confidence=confidence)
    else:
        ci = bootstrap_interval(
            pairs,
            lambda sample: stat([p[0] for p in sample]) - stat([p[1] for p in sample]),
            resamples=resamples,
            seed=seed,
            confidence=confidence,
        )
    tuned_value, base_value = stat(t), stat(b)
    return {
        "n": len(pairs),
        "tuned": tuned_value,
        "base": base_value,
        "delta": tuned_value - base_value,
        "ci": ci,
        "ci_note": TOO_FEW if ci is None else None,
        "confidence": confidence,
        "resamples": resamples,
        "seed": seed,
        "min_items": min_items,
    }


def delta_row(
    tuned: Sequence | Mapping,
    base: Sequence | Mapping,
    *,
    team: str,
    system: str,
    metric: str,
    scale: float = 100.0,
    **options: Any,
) -> dict[str, Any]:
    """A row of the report's tuned-vs-base table: :func:`paired_delta` (``options``: statistic,
    resamples, seed, confidence, min_items) with its ``team``, ``system``, ``metric`` and display ``scale``
    (100 for rates in [0, 1], 1 for scores already on a 0-100 scale)."""
    return {"team": team, "system": system, "metric": metric, "scale": scale, **paired_delta(tuned, base, **options)}
