"""Tagging metrics equal scikit-learn's, overall and per knowledge id."""

import random

import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_score, recall_score

from pipelines.tagging.metrics import binary_metrics, metrics_by_group


def sk(y_true, y_pred):
    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=[0, 1]).ravel()
    return {
        "accuracy": accuracy_score(y_true, y_pred),
        "precision": precision_score(y_true, y_pred, zero_division=0),
        "recall": recall_score(y_true, y_pred, zero_division=0),
        "f1": f1_score(y_true, y_pred, zero_division=0),
        "confusion": {"tp": int(tp), "fp": int(fp), "tn": int(tn), "fn": int(fn)},
    }


@pytest.mark.parametrize("seed", range(6))
def test_binary_metrics_equal_sklearn(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    y_true = [rng.randint(0, 1) for _ in range(n)]
    y_pred = [rng.randint(0, 1) for _ in range(n)] if seed % 3 else [0] * n  # seed 0, 3: no positive prediction
    ours, ref = binary_metrics(y_true, y_pred), sk(y_true, y_pred)
    for key in ("accuracy", "precision", "recall", "f1"):
        assert ours[key] == pytest.approx(ref[key]), key
    assert ours["confusion"] == ref["confusion"] and ours["n"] == n


def test_per_group_metrics_equal_sklearn_on_each_group():
    groups = ["a", "b", "a", "b", "c", "a"]
    y_true = [1, 0, 0, 1, 1, 1]
    y_pred = [1, 1, 0, 0, 1, 0]
    per = metrics_by_group(groups, y_true, y_pred)
    assert list(per) == ["a", "b", "c"]
    for g in per:
        idx = [i for i, x in enumerate(groups) if x == g]
        ref = sk([y_true[i] for i in idx], [y_pred[i] for i in idx])
        assert per[g]["f1"] == pytest.approx(ref["f1"]) and per[g]["confusion"] == ref["confusion"]


def test_length_mismatch_raises():
    with pytest.raises(ValueError, match="3 labels but 2 predictions"):
        binary_metrics([1, 0, 1], [1, 0])
