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


# issue 11, defect 6: a failed sample (None) is its own outcome, scored by policy, with coverage
LABELS = [1, 1, 0, 0, 1, 0]
PREDS = [1, None, None, 0, 1, 1]  # two failures: one on a positive, one on a negative


def test_failures_count_as_wrong_by_default_and_coverage_is_reported():
    from pipelines.tagging.metrics import scored_metrics

    m = scored_metrics(LABELS, PREDS)
    assert m["coverage"] == pytest.approx(4 / 6) and m["answered"] == 4 and m["failed"] == 2
    assert m["failure_outcome"] == "wrong" and m["n"] == 6
    # wrong: the failed positive is a false negative, the failed negative a false positive
    assert m["confusion"] == {"tp": 2, "fp": 2, "tn": 1, "fn": 1}
    assert m["accuracy"] == pytest.approx(3 / 6) and m["precision"] == pytest.approx(2 / 4)


def test_failures_count_as_no_or_are_left_out_when_asked():
    from pipelines.tagging.metrics import scored_metrics

    as_no = scored_metrics(LABELS, PREDS, failure_outcome="no")
    assert as_no["confusion"] == {"tp": 2, "fp": 1, "tn": 2, "fn": 1} and as_no["precision"] == pytest.approx(2 / 3)
    left_out = scored_metrics(LABELS, PREDS, failure_outcome="omit")
    assert left_out["n"] == 4 and left_out["confusion"] == {"tp": 2, "fp": 1, "tn": 1, "fn": 0}
    assert left_out["coverage"] == pytest.approx(4 / 6)
    with pytest.raises(ValueError, match="failure_outcome"):
        scored_metrics(LABELS, PREDS, failure_outcome="maybe")


def test_grouped_scored_metrics_apply_the_policy_per_group():
    from pipelines.tagging.metrics import scored_metrics_by_group

    per = scored_metrics_by_group(["a", "a", "b", "b", "a", "b"], LABELS, PREDS)
    assert per["a"]["coverage"] == pytest.approx(2 / 3) and per["a"]["confusion"]["fn"] == 1
    assert per["b"]["confusion"]["fp"] == 2
