"""Reciprocal-rank fusion against a hand computation."""

import pytest

from pipelines.retrieval.fusion import reciprocal_rank_fusion


def test_rrf_matches_hand_computation():
    lists = [["a", "b", "c"], ["b", "c", "d"], ["c", "a"]]
    fused = dict(reciprocal_rank_fusion(lists, k=60))
    # by hand: a = 1/61 + 1/62; b = 1/62 + 1/61; c = 1/63 + 1/62 + 1/61; d = 1/63
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 62 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 63)
    assert [item for item, _ in reciprocal_rank_fusion(lists, k=60)] == ["c", "a", "b", "d"]


def test_rrf_small_k_and_duplicates_within_a_list_count_once():
    fused = reciprocal_rank_fusion([["x", "x", "y"], ["y"]], k=1)
    assert fused == [("y", pytest.approx(1 / 2 + 1 / 3)), ("x", pytest.approx(1 / 2))]
    assert reciprocal_rank_fusion([]) == []


def test_weighted_rrf_matches_hand_computation():
    fused = dict(reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=10, weights=[2.0, 1.0]))
    assert fused == {"a": pytest.approx(2 / 11 + 1 / 12), "b": pytest.approx(2 / 12 + 1 / 11)}
    with pytest.raises(ValueError, match="1 weights for 2 ranked lists"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])
