"""Entry points that wire the parts together: open a :class:`Retriever` on a built store (what the
RAM2C expert groups use) and run the ``build_kb`` stage's work (build, then score retrieval).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from pipelines.llm.client import LLM, LLMRuntime
from pipelines.llm.types import Backend
from pipelines.retrieval.build import build_knowledge_base
from pipelines.retrieval.config import KINDS, BuildKBConfig, RetrievalConfig
from pipelines.retrieval.embedder_choice import build_embedder
from pipelines.retrieval.embedders import Embedder
from pipelines.retrieval.quality import check_labels, evaluate_retrieval, load_queries
from pipelines.retrieval.rerank import CrossEncoderReranker
from pipelines.retrieval.retriever import Retriever
from pipelines.retrieval.rewrite import QueryRewriter
from pipelines.retrieval.store import KnowledgeStore

log = logging.getLogger(__name__)


def open_retriever(
    build_cfg: BuildKBConfig,
    retrieval_cfg: RetrievalConfig,
    *,
    llm: LLM | None = None,
    embedder: Embedder | None = None,
    root: Path | str = ".",
) -> Retriever:
    """A retriever on the store of ``build_cfg``; ``llm`` (role ``query_rewriter``) enables rewrites."""
    store_path = Path(root) / build_cfg.store.path
    if build_cfg.store.backend == "persistent" and not store_path.is_dir():
        raise FileNotFoundError(f"knowledge base {store_path} not found; run `dvc repro build_kb` first")
    rewriter = None
    if llm is not None and retrieval_cfg.n_rewrites > 0:
        rewriter = QueryRewriter(
            llm,
            retrieval_cfg.n_rewrites,
            language=retrieval_cfg.rewrite_language,
            max_tokens=retrieval_cfg.rewrite_max_tokens,
            temperature=retrieval_cfg.rewrite_temperature,
            output_mode=retrieval_cfg.rewrite_output_mode,
        )
    reranker = CrossEncoderReranker(retrieval_cfg.rerank) if retrieval_cfg.rerank.enabled else None
    return Retriever(
        KnowledgeStore.open(build_cfg.store, root),
        embedder or build_embedder(build_cfg.embedder),
        retrieval_cfg,
        rewriter=rewriter,
        reranker=reranker,
    )


async def _score(
    build_cfg: BuildKBConfig,
    retrieval_cfg: RetrievalConfig,
    embedder: Embedder,
    root: Path,
    backends: dict[str, Backend] | None,
    missing_sources: list[str],
) -> dict[str, Any]:
    runtime = LLMRuntime(build_cfg.quality.llm, backends=backends) if build_cfg.quality.llm else None
    try:
        llm = runtime.for_role("query_rewriter") if runtime else None
        retriever = open_retriever(build_cfg, retrieval_cfg, llm=llm, embedder=embedder, root=root)
        path = root / build_cfg.quality.queries
        known = {str(m.get("doc")) for k in KINDS for _, m in retriever.store.iter_metadata(k)}
        queries = check_labels(load_queries(path), known, missing_sources=missing_sources, path=str(path))
        result = await evaluate_retrieval(retriever, queries, build_cfg.quality.ks)
        result["rewriter"] = llm.identity if llm else None
        result["n_rewrites"] = retrieval_cfg.n_rewrites if llm else 0
        result["llm_usage"] = runtime.accounting.summary() if runtime else {}
        return result
    finally:
        if runtime is not None:
            await runtime.close()


def run_build_kb(
    build_cfg: BuildKBConfig,
    retrieval_cfg: RetrievalConfig,
    *,
    root: Path | str = ".",
    embedder: Embedder | None = None,
    backends: dict[str, Backend] | None = None,
    progress: bool = True,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Build the knowledge bases, then (if enabled) score retrieval; returns (metrics, quality)."""
    root = Path(root)
    embedder = embedder or build_embedder(build_cfg.embedder)
    metrics = build_knowledge_base(build_cfg, retrieval_cfg.groups, root=root, embedder=embedder, progress=progress)
    if not build_cfg.quality.enabled:
        return metrics, None
    if not build_cfg.quality.llm:
        log.warning("build_kb.quality.llm not set: multi-query scores use the original query only")
    missing = metrics["optional_sources_missing"]
    quality = asyncio.run(_score(build_cfg, retrieval_cfg, embedder, root, backends, missing))
    metrics["quality"] = {"dense": quality["dense"], "multi_query_rrf": quality["multi_query_rrf"]}
    return metrics, quality
