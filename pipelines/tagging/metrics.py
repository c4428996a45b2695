"""Binary tagging metrics from scikit-learn: accuracy, precision, recall, F1 and confusion counts,
overall and per knowledge id (positive class = 1, "the question tests the knowledge"; 0/0 ratios are 0)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support


def confusion(y_true: Sequence[int], y_pred: Sequence[int]) -> dict[str, int]:
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} labels but {len(y_pred)} predictions")
    if not y_true:
        return {"tp": 0, "fp": 0, "tn": 0, "fn": 0}
    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=[0, 1]).ravel()
    return {"tp": int(tp), "fp": int(fp), "tn": int(tn), "fn": int(fn)}


def binary_metrics(y_true: Sequence[int], y_pred: Sequence[int]) -> dict[str, Any]:
    """``{"n", "accuracy", "precision", "recall", "f1", "confusion": {tp, fp, tn, fn}}``."""
    c = confusion(y_true, y_pred)
    if not y_true:
        return {"n": 0, "accuracy": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0, "confusion": c}
    precision, recall, f1, _ = precision_recall_fscore_support(
        y_true, y_pred, labels=[1], average="binary", pos_label=1, zero_division=0
    )
    return {
        "n": len(y_true),
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
        "confusion": c,
    }


def metrics_by_group(groups: Sequence[str], y_true: Sequence[int], y_pred: Sequence[int]) -> dict[str, dict[str, Any]]:
    """:func:`binary_metrics` per group value (e.g. knowledge id), sorted by group."""
    index: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(groups):
        index[group].append(i)
    return {g: binary_metrics([y_true[i] for i in idx], [y_pred[i] for i in idx]) for g, idx in sorted(index.items())}
