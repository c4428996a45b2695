"""Retrieval quality on a labelled query set: recall@k and MRR, dense-only vs. multi-query RRF.

A query row (JSONL): ``{"id", "query", "group" | "kinds", "relevant": [document ids]}``, where a
document id is the chunk metadata ``doc`` (``<source name>/<file>#<record>``). Rankings are over
documents: the chunks returned are collapsed to their documents, first occurrence kept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pipelines.io import read_jsonl
from pipelines.retrieval.loaders import KBBuildError
from pipelines.retrieval.retriever import Hit, Retriever


def load_queries(path: Path | str) -> list[dict[str, Any]]:
    """Labelled queries; a row without ``query`` or a non-empty ``relevant`` list raises."""
    rows = read_jsonl(path)
    for number, row in enumerate(rows, start=1):
        if not row.get("query") or not isinstance(row.get("relevant"), list) or not row["relevant"]:
            raise KBBuildError(f"{path}: query #{number} needs 'query' and a non-empty 'relevant' list")
    return rows


def doc_ranking(hits: list[Hit]) -> list[str]:
    ranking: list[str] = []
    for hit in hits:
        if hit.source not in ranking:
            ranking.append(hit.source)
    return ranking


def score_rankings(rankings: list[list[str]], relevant: list[list[str]], ks: list[int]) -> dict[str, float]:
    """Mean recall@k (share of relevant documents in the top k) and MRR (first relevant document)."""
    out: dict[str, float] = {}
    n = len(rankings)
    for k in ks:
        total = sum(len(set(r[:k]) & set(rel)) / len(set(rel)) for r, rel in zip(rankings, relevant, strict=False))
        out[f"recall@{k}"] = round(total / n, 4) if n else 0.0
    rr = []
    for ranking, rel in zip(rankings, relevant, strict=False):
        ranks = [i for i, doc in enumerate(ranking, start=1) if doc in set(rel)]
        rr.append(1.0 / ranks[0] if ranks else 0.0)
    out["mrr"] = round(sum(rr) / n, 4) if n else 0.0
    return out


async def evaluate_retrieval(retriever: Retriever, queries: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    """Score dense-only and multi-query RRF on ``queries``; per-query rankings are returned too."""
    depth = retriever.cfg.per_query_k

    async def one(row: dict[str, Any]) -> tuple[list[str], list[str]]:
        # the dense baseline is exactly the original query's candidate list inside multi-query retrieval,
        # so the difference measures what the rewrites and the fusion add
        kw = {"group": row.get("group"), "kinds": row.get("kinds"), "top_k": depth}
        dense = doc_ranking(retriever.dense(row["query"], **kw))
        fused = doc_ranking(await retriever.retrieve(row["query"], **kw))
        return dense[: max(ks)], fused[: max(ks)]

    results = await asyncio.gather(*(one(row) for row in queries))
    relevant = [row["relevant"] for row in queries]
    failures = retriever.rewriter.failures if retriever.rewriter is not None else 0
    return {
        "queries": len(queries),
        "ks": ks,
        "dense": score_rankings([r[0] for r in results], relevant, ks),
        "multi_query_rrf": score_rankings([r[1] for r in results], relevant, ks),
        "rewrite_failures": failures,
        "per_query": [
            {"id": row.get("id"), "query": row["query"], "relevant": row["relevant"], "dense": d, "multi_query_rrf": f}
            for row, (d, f) in zip(queries, results, strict=False)
        ],
    }
