"""Seeded bootstrap intervals for tuned-vs-base deltas."""

import numpy as np
import pytest

from pipelines.reporting.tables import deltas_table
from pipelines.stats.bootstrap import bootstrap_interval, delta_row, paired_delta, resample_indices


def test_fixed_seed_is_reproducible_and_seed_matters():
    values = list(np.random.default_rng(0).normal(size=50))
    a = bootstrap_interval(values, resamples=500, seed=11)
    assert a == bootstrap_interval(values, resamples=500, seed=11)
    assert a != bootstrap_interval(values, resamples=500, seed=12)
    # the generic path (a statistic over resampled items) draws the same resamples
    generic = bootstrap_interval(values, lambda xs: float(np.mean(xs)), resamples=500, seed=11)
    assert generic == pytest.approx(a)
    assert resample_indices(5, resamples=3, seed=0).shape == (3, 5)


def test_interval_width_matches_the_standard_error():
    values = np.random.default_rng(1).normal(loc=0.3, scale=1.0, size=400)
    low, high = bootstrap_interval(values, resamples=2000, seed=0)
    assert low < values.mean() < high
    assert high - low == pytest.approx(2 * 1.96 / np.sqrt(400), rel=0.15)  # about 0.196


def test_paired_delta_of_per_item_metric():
    rng = np.random.default_rng(2)
    base = rng.uniform(size=200)
    tuned = base + 0.1 + rng.normal(scale=0.05, size=200)  # a consistent gain
    result = paired_delta(list(tuned), list(base), resamples=1000, seed=0)
    assert result["n"] == 200 and result["delta"] == pytest.approx(tuned.mean() - base.mean())
    low, high = result["ci"]
    assert low < result["delta"] < high and low > 0.08 and high < 0.12  # paired: narrow
    assert (result["resamples"], result["seed"], result["confidence"]) == (1000, 0, 0.95)


def test_identical_systems_give_a_zero_interval_and_mappings_align_by_id():
    base = {"b": 0.5, "a": 1.0, "c": 0.0}
    assert paired_delta(base, dict(base), resamples=100)["ci"] == [0.0, 0.0]
    tuned = {"a": 1.0, "b": 1.0, "c": 1.0}
    result = paired_delta(tuned, base, resamples=100)
    assert result["delta"] == pytest.approx(0.5) and result["n"] == 3
    with pytest.raises(ValueError, match="same items"):
        paired_delta({"a": 1.0}, {"b": 1.0})
    with pytest.raises(ValueError, match="equal lengths"):
        paired_delta([1.0], [1.0, 2.0])


def test_paired_delta_of_a_corpus_statistic_micro_f1():
    def micro_f1(pairs):  # items: (gold set, predicted set)
        tp = sum(len(g & p) for g, p in pairs)
        fp = sum(len(p - g) for g, p in pairs)
        fn = sum(len(g - p) for g, p in pairs)
        return 2 * tp / (2 * tp + fp + fn) if tp else 0.0

    gold = [{1, 2}, {3}, {4, 5}, {6}]
    tuned = [(g, set(g)) for g in gold]
    base = [(g, {min(g)}) for g in gold]
    result = paired_delta(tuned, base, statistic=micro_f1, resamples=300, seed=5)
    assert result["tuned"] == 1.0 and result["base"] == pytest.approx(2 * 4 / (2 * 4 + 2))
    # a resample of single-element items only has delta 0; one of two-element items only has 1/3
    assert 0.0 <= result["ci"][0] <= result["delta"] <= result["ci"][1] <= 1 / 3 + 1e-12
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_interval([1.0, 2.0], confidence=1.5)


def test_delta_row_feeds_the_report_table():
    row = delta_row([1, 0, 1, 1], [0, 0, 1, 0], team="tagging", system="team", metric="accuracy", resamples=200, seed=0)
    assert (row["team"], row["metric"], row["scale"], row["n"]) == ("tagging", "accuracy", 100.0, 4)
    assert row["delta"] == pytest.approx(0.5)
    cells = deltas_table([row]).rows[0]
    assert cells[:6] == ["tagging", "team", "accuracy", "25.0", "75.0", "+50.0"] and cells[7] == "4"
