"""Binary tagging metrics from scikit-learn: accuracy, precision, recall, F1 and confusion counts,
overall and per knowledge id (positive class = 1, "the question tests the knowledge"; 0/0 ratios are 0);
failed samples scored by a policy beside a coverage column (:func:`scored_metrics`)."""

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


FAILURE_OUTCOMES = ("wrong", "no", "omit")


def scored_metrics(
    y_true: Sequence[int], y_pred: Sequence[int | None], *, failure_outcome: str = "wrong"
) -> dict[str, Any]:
    """:func:`binary_metrics` where a prediction of None (a failed sample: crashed, unparsed, or a
    verdict that hung on a failed sub-task) is its own outcome, scored by ``failure_outcome``:
    ``wrong`` (the opposite of the label: a failed positive is a false negative, a failed negative a
    false positive), ``no`` (predicted 0) or ``omit`` (left out of the scores). Adds ``answered``,
    ``failed``, ``coverage`` (answered / all) and ``failure_outcome``."""
    if failure_outcome not in FAILURE_OUTCOMES:
        raise ValueError(f"failure_outcome {failure_outcome!r}; use one of {', '.join(FAILURE_OUTCOMES)}")
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} labels but {len(y_pred)} predictions")
    pairs = list(zip(y_true, y_pred, strict=True))
    failed = sum(p is None for _, p in pairs)
    if failure_outcome == "omit":
        pairs = [(t, p) for t, p in pairs if p is not None]
    else:
        pairs = [(t, p if p is not None else (1 - t if failure_outcome == "wrong" else 0)) for t, p in pairs]
    metrics = binary_metrics([t for t, _ in pairs], [int(p) for _, p in pairs])
    total = len(y_true)
    metrics.update(
        answered=total - failed,
        failed=failed,
        coverage=(total - failed) / total if total else 0.0,
        failure_outcome=failure_outcome,
    )
    return metrics


def scored_metrics_by_group(
    groups: Sequence[str], y_true: Sequence[int], y_pred: Sequence[int | None], *, failure_outcome: str = "wrong"
) -> dict[str, dict[str, Any]]:
    """:func:`scored_metrics` per group value, sorted by group."""
    index: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(groups):
        index[group].append(i)
    return {
        g: scored_metrics([y_true[i] for i in idx], [y_pred[i] for i in idx], failure_outcome=failure_outcome)
        for g, idx in sorted(index.items())
    }
