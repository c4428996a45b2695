"""Multi-query retrieval for the expert groups.

``retrieve(query, group=...)`` embeds the query and its LLM rewrites, takes the top
``per_query_k`` chunks per query from every collection the group reads (optionally rescored with
BGE-M3 lexical weights), fuses the ranked lists by reciprocal-rank fusion, drops duplicate texts,
optionally reranks with a cross-encoder (the candidates beyond ``rerank.candidates`` follow in
fused order), and returns a :class:`RetrievalResult`: a sequence of :class:`Hit` objects that say
how each chunk was found, plus what the step did for a trace (queries, hits with ids, kinds and
scores, latency, the rewriter's agent record). Embedding and Chroma queries run in a worker
thread, never on the event loop; the Chroma queries of concurrent retrievals are merged into one
per kind (:class:`~pipelines.retrieval.search_batch.SearchBatcher`; every query's hits stay its
own). ``dense(query, ...)`` is the single-query baseline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.agents.agent import AgentRecord
from pipelines.retrieval.config import RetrievalConfig
from pipelines.retrieval.embedders import Embedder, Encoded, lexical_score
from pipelines.retrieval.fusion import reciprocal_rank_fusion
from pipelines.retrieval.rerank import CrossEncoderReranker
from pipelines.retrieval.rewrite import QueryRewriter
from pipelines.retrieval.search_batch import SearchBatcher
from pipelines.retrieval.store import KnowledgeStore, StoredChunk


def with_language(where: dict | None, language: str | None) -> dict | None:
    """A Chroma ``where`` filter that also keeps to ``language`` (``$and`` with any other condition)."""
    if language is None:
        return where
    condition = {"language": language}
    return condition if not where else {"$and": [where, condition]}


@dataclass
class Hit:
    """A retrieved chunk: ``scores`` has ``dense`` (best cosine), ``rrf`` and maybe ``sparse``/``rerank``;
    ``found_by`` lists the queries (original first, then rewrites) whose top-k held it."""

    id: str
    text: str
    kind: str
    source: str
    metadata: dict[str, Any]
    scores: dict[str, float] = field(default_factory=dict)
    found_by: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        """The score the hit was ranked by: rerank, else RRF, else dense."""
        for name in ("rerank", "rrf", "dense"):
            if name in self.scores:
                return self.scores[name]
        return 0.0

    def to_dict(self) -> dict[str, Any]:
        meta = {k: v for k, v in self.metadata.items() if k != "sparse"}
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "source": self.source,
            "metadata": meta,
            "scores": self.scores,
            "found_by": self.found_by,
        }


@dataclass
class RetrievalResult(Sequence):
    """The hits of one :meth:`Retriever.retrieve` call (iterate, index and ``len`` it like a list of
    :class:`Hit`) and what the step did: the queries used (original first), the kinds searched,
    the latency and the query rewriter's :class:`AgentRecord` (None without a rewriter).

    Record it in a sample trace with ``result.add_to(trace)`` (the rewriter's LLM step, then the
    retrieval step), or ``trace.add_result(**result.trace_dict())`` for the retrieval step alone.
    """

    query: str
    hits: list[Hit]
    queries: list[str]
    kinds: list[str]
    group: str | None = None
    latency_s: float = 0.0
    rewrite: AgentRecord | None = None

    def __getitem__(self, index):
        return self.hits[index]

    def __len__(self) -> int:
        return len(self.hits)

    def trace_dict(self) -> dict[str, Any]:
        """Keyword arguments of ``SampleTrace.add_result`` for this retrieval step."""
        return {
            "agent": "retrieval",
            "role": self.group or "all",
            "inputs": {"query": self.query, "queries": self.queries, "kinds": self.kinds, "group": self.group},
            "result": {
                "hits": [
                    {
                        "id": h.id,
                        "kind": h.kind,
                        "source": h.source,
                        "score": h.score,
                        "scores": dict(h.scores),
                        "text": h.text,
                    }
                    for h in self.hits
                ]
            },
            "ok": True,
            "latency_s": round(self.latency_s, 6),
        }

    def add_to(self, trace: Any) -> None:
        """Add the rewriter's agent record (if any) and the retrieval step to a ``SampleTrace``."""
        if self.rewrite is not None:
            trace.add(self.rewrite)
        trace.add_result(**self.trace_dict())


class Retriever:
    """Queries the knowledge store for expert groups; the rewriter and reranker are optional."""

    def __init__(
        self,
        store: KnowledgeStore,
        embedder: Embedder,
        cfg: RetrievalConfig,
        *,
        rewriter: QueryRewriter | None = None,
        reranker: CrossEncoderReranker | None = None,
    ):
        self.store = store
        self.embedder = embedder
        self.cfg = cfg
        self.rewriter = rewriter
        self.reranker = reranker
        # one tokenizer/model: concurrent encodes would clash, unless the embedder says they may not
        self._encode_lock = contextlib.nullcontext() if getattr(embedder, "thread_safe", False) else threading.Lock()
        self.searches = SearchBatcher(store)  # concurrent retrievals share Chroma queries

    def kinds_for(self, group: str | None, kinds: list[str] | None) -> list[str]:
        if kinds:
            return list(kinds)
        if group is None:
            return sorted({k for ks in self.cfg.groups.values() for k in ks})
        if group not in self.cfg.groups:
            raise KeyError(f"unknown expert group {group!r}; known: {sorted(self.cfg.groups)} (retrieval.groups)")
        return list(self.cfg.groups[group])

    def _encode(self, queries: list[str]) -> Encoded:
        with self._encode_lock:
            return self.embedder.encode_queries(queries)

    def _ranked(self, queries: list[str], kinds: list[str], k: int, where: dict | None) -> list[list[StoredChunk]]:
        """Top-``k`` chunks per query over ``kinds``, merged by (hybrid) score."""
        encoded = self._encode(queries)
        return self._merge(encoded, [self.store.query(kind, encoded.dense, k, where) for kind in kinds], k)

    def _merge(self, encoded: Encoded, per_kind: list[list[list[StoredChunk]]], k: int) -> list[list[StoredChunk]]:
        """Each query's chunks of every kind (``per_kind[kind][query]``), best ``k`` by (hybrid) score."""
        merged: list[list[StoredChunk]] = [[] for _ in range(len(encoded.dense))]
        for hits in per_kind:
            for i, chunks in enumerate(hits):
                merged[i].extend(chunks)
        if self.cfg.sparse_weight > 0 and encoded.sparse is not None:
            for i, chunks in enumerate(merged):
                for chunk in chunks:
                    weights = json.loads(chunk.metadata.get("sparse") or "{}")
                    chunk.metadata["_sparse"] = lexical_score(encoded.sparse[i], weights)
        for chunks in merged:
            chunks.sort(key=lambda c: -(c.score + self.cfg.sparse_weight * c.metadata.get("_sparse", 0.0)))
        return [chunks[:k] for chunks in merged]

    def _hit(self, chunk: StoredChunk) -> Hit:
        meta = {k: v for k, v in chunk.metadata.items() if not k.startswith("_")}
        scores = {"dense": round(chunk.score, 6)}
        if "_sparse" in chunk.metadata:
            scores["sparse"] = round(chunk.metadata["_sparse"], 6)
        return Hit(chunk.id, chunk.text, meta.get("kind", ""), meta.get("doc", meta.get("file", "")), meta, scores)

    def dense(
        self,
        query: str,
        *,
        group: str | None = None,
        kinds: list[str] | None = None,
        where: dict | None = None,
        top_k: int | None = None,
        language: str | None = None,
    ) -> list[Hit]:
        """Single-query dense retrieval (the baseline); ``language`` as in :meth:`retrieve`."""
        where = with_language(where, language)
        chunks = self._ranked([query], self.kinds_for(group, kinds), top_k or self.cfg.top_k, where)[0]
        hits = [self._hit(c) for c in chunks]
        for hit in hits:
            hit.found_by = [query]
        return hits

    async def retrieve(
        self,
        query: str,
        *,
        group: str | None = None,
        kinds: list[str] | None = None,
        where: dict | None = None,
        top_k: int | None = None,
        rewrites: Sequence[str] | None = None,
        language: str | None = None,
    ) -> RetrievalResult:
        """Multi-query retrieval with RRF, deduplication and optional rerank; best first.

        ``rewrites``: phrasings made beforehand (one rewrite call shared by several retrievals);
        given, the rewriter is not called and the result has no rewriter record. ``language``
        (``en``, ``zh``): only chunks in that language (their ``language`` metadata), so an English
        dialogue never gets a Chinese document from a bilingual knowledge base."""
        where = with_language(where, language)
        start = time.perf_counter()
        top_k = top_k or self.cfg.top_k
        kinds = self.kinds_for(group, kinds)
        outcome = None
        if rewrites is None and self.rewriter is not None:
            outcome = await self.rewriter.run(query)
        rewrites = list(rewrites) if rewrites is not None else (outcome.rewrites if outcome is not None else [])
        queries = [query] + rewrites
        encoded = await asyncio.to_thread(self._encode, queries)
        per_kind = await self.searches.search(kinds, encoded.dense, self.cfg.per_query_k, where)
        if self.cfg.sparse_weight > 0:  # lexical scores parse every chunk's weights: off the event loop
            ranked = await asyncio.to_thread(self._merge, encoded, per_kind, self.cfg.per_query_k)
        else:  # a sort of a few dozen scores costs less than the hop to a thread
            ranked = self._merge(encoded, per_kind, self.cfg.per_query_k)
        by_id: dict[str, Hit] = {}
        for q, chunks in zip(queries, ranked, strict=False):
            for chunk in chunks:
                hit = by_id.setdefault(chunk.id, self._hit(chunk))
                hit.scores["dense"] = max(hit.scores["dense"], round(chunk.score, 6))
                hit.found_by.append(q)
        weights = [self.cfg.original_weight] + [1.0] * len(rewrites)
        fused = reciprocal_rank_fusion([[c.id for c in chunks] for chunks in ranked], self.cfg.rrf_k, weights)
        hits: list[Hit] = []
        seen_texts: set[str] = set()
        for chunk_id, score in fused:
            hit = by_id[chunk_id]
            key = " ".join(hit.text.split()).lower()
            if key in seen_texts:
                continue
            seen_texts.add(key)
            hit.scores["rrf"] = round(score, 6)
            hits.append(hit)
        if self.reranker is not None and hits:
            candidates, rest = hits[: self.cfg.rerank.candidates], hits[self.cfg.rerank.candidates :]
            scores = await asyncio.to_thread(self.reranker.score, query, [h.text for h in candidates])
            for hit, score in zip(candidates, scores, strict=False):
                hit.scores["rerank"] = round(score, 6)
            hits = sorted(candidates, key=lambda h: -h.scores["rerank"]) + rest  # the tail keeps its fused order
        return RetrievalResult(
            query=query,
            hits=hits[:top_k],
            queries=queries,
            kinds=kinds,
            group=group,
            latency_s=time.perf_counter() - start,
            rewrite=outcome.record if outcome is not None else None,
        )
