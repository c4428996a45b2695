"""Binary tagging metrics: accuracy, precision, recall, F1 and confusion counts, overall and per
knowledge id (positive class = 1, "the question tests the knowledge"; 0/0 ratios are 0)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any


def confusion(y_true: Sequence[int], y_pred: Sequence[int]) -> dict[str, int]:
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} labels but {len(y_pred)} predictions")
    counts = {"tp": 0, "fp": 0, "tn": 0, "fn": 0}
    for truth, pred in zip(y_true, y_pred, strict=False):
        key = ("t" if truth == pred else "f") + ("p" if pred else "n")
        counts[key] += 1
    return counts


def binary_metrics(y_true: Sequence[int], y_pred: Sequence[int]) -> dict[str, Any]:
    """``{"n", "accuracy", "precision", "recall", "f1", "confusion": {tp, fp, tn, fn}}``."""
    c = confusion(y_true, y_pred)
    n = sum(c.values())
    precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 0.0
    recall = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "n": n,
        "accuracy": (c["tp"] + c["tn"]) / n if n else 0.0,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "confusion": c,
    }


def metrics_by_group(groups: Sequence[str], y_true: Sequence[int], y_pred: Sequence[int]) -> dict[str, dict[str, Any]]:
    """:func:`binary_metrics` per group value (e.g. knowledge id), sorted by group."""
    index: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(groups):
        index[group].append(i)
    return {g: binary_metrics([y_true[i] for i in idx], [y_pred[i] for i in idx]) for g, idx in sorted(index.items())}
