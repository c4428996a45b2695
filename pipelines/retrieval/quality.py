"""Retrieval quality on a labelled query set: recall@k and MRR, dense-only vs. multi-query RRF.

A query row (JSONL): ``{"id", "query", "group" | "kinds", "relevant": [document ids]}``, where a
document id is the chunk metadata ``doc`` (``<source name>/<file>#<record>``). Rankings are over
documents: the chunks returned are collapsed to their documents, first occurrence kept.
:func:`check_labels` fails on relevant ids that no stored document has (they would score 0
silently), except ids of optional sources left out of this build, which are dropped with a warning.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipelines.io import read_jsonl
from pipelines.retrieval.loaders import KBBuildError
from pipelines.retrieval.retriever import Hit, Retriever

log = logging.getLogger(__name__)


def load_queries(path: Path | str) -> list[dict[str, Any]]:
    """Labelled queries; a row without ``query`` or a non-empty ``relevant`` list raises."""
    rows = read_jsonl(path)
    for number, row in enumerate(rows, start=1):
        if not row.get("query") or not isinstance(row.get("relevant"), list) or not row["relevant"]:
            raise KBBuildError(f"{path}: query #{number} needs 'query' and a non-empty 'relevant' list")
    return rows


def check_labels(
    queries: list[dict[str, Any]], known_docs: Iterable[str], *, missing_sources: Iterable[str] = (), path: str = ""
) -> list[dict[str, Any]]:
    """The queries with every relevant id known; raises KBBuildError naming unknown ids.

    An unknown id of a source in ``missing_sources`` (optional, absent here) is dropped with a
    warning, and a query left with no relevant id is skipped.
    """
    known, missing = set(known_docs), set(missing_sources)
    unknown = sorted({d for row in queries for d in row["relevant"] if d not in known})
    fatal = [d for d in unknown if d.split("/", 1)[0] not in missing]
    if fatal:
        shown = ", ".join(fatal[:10]) + (f" and {len(fatal) - 10} more" if len(fatal) > 10 else "")
        raise KBBuildError(
            f"{path or 'quality queries'}: {len(fatal)} relevant id(s) match no stored document: {shown}; "
            "fix the labels (ids are '<source name>/<file>#<record>', see the chunk metadata 'doc')"
        )
    if unknown:
        log.warning("quality labels of optional sources left out are ignored: %s", ", ".join(unknown))
    kept = []
    for row in queries:
        relevant = [d for d in row["relevant"] if d in known]
        if relevant:
            kept.append({**row, "relevant": relevant})
        else:
            log.warning("quality query %s skipped: its relevant documents are all in left-out sources", row.get("id"))
    return kept


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
        dense = doc_ranking(await asyncio.to_thread(retriever.dense, row["query"], **kw))
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
