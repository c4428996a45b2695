"""Reciprocal-rank fusion: score(d) = sum over ranked lists i of w_i / (k + rank of d in list i),
ranks from 1, weights 1 unless given (the retriever may weight the original query's list higher)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Hashable]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[Hashable, float]]:
    """Fuse ranked lists of ids; returns (id, score) best first, ties kept in first-seen order.

    An id repeated within one list counts once, at its first position (later copies are removed).
    """
    scores: dict[Hashable, float] = {}
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} ranked lists")
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(dict.fromkeys(ranking), start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))
