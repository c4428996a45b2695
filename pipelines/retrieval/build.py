"""Build (or incrementally rebuild) the knowledge bases from the configured sources.

Order matters for safety: (1) every source is read, validated and chunked; (2) the store is
read to find which chunks are new, changed, unchanged or gone; (3) only new and changed chunks
are embedded; (4) only then is the store written. Any error in steps 1-3 (a corrupt file, a
wrong CSV field, a missing folder, a model that fails) leaves the previous knowledge base
exactly as it was and still queryable.

Chunk id = ``<kind>-`` + sha1(source document id, position, text)[:20]: an unchanged chunk keeps
its id and is not embedded again; an edited chunk gets a new id at the same (document, position)
and replaces the old one; chunks whose document disappeared are deleted.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipelines.retrieval.chunking import chunk_text
from pipelines.retrieval.config import KINDS, BuildKBConfig
from pipelines.retrieval.embedders import Embedder, build_embedder
from pipelines.retrieval.loaders import Document, KBBuildError, LoadStats, list_files, load_source
from pipelines.retrieval.store import KnowledgeStore, sparse_to_meta

log = logging.getLogger(__name__)


@dataclass
class Chunk:
    id: str
    text: str
    metadata: dict[str, Any]


@dataclass
class LoadedSources:
    chunks: dict[str, list[Chunk]] = field(default_factory=lambda: {k: [] for k in KINDS})
    stats: LoadStats = field(default_factory=LoadStats)
    documents: int = 0
    chunks_capped: int = 0
    missing_optional: list[str] = field(default_factory=list)


def chunk_id(kind: str, doc_id: str, position: int, text: str) -> str:
    digest = hashlib.sha1(f"{doc_id}\x1f{position}\x1f{text}".encode()).hexdigest()[:20]
    return f"{kind}-{digest}"


def groups_of(kind: str, groups: dict[str, list[str]]) -> str:
    """Comma-separated expert groups that read ``kind`` (metadata ``group``)."""
    return ",".join(sorted(g for g, kinds in groups.items() if kind in kinds)) or "none"


def document_chunks(doc: Document, cfg: BuildKBConfig, groups: dict[str, list[str]]) -> list[Chunk]:
    texts = chunk_text(doc.text, cfg.chunking.size, cfg.chunking.overlap, cfg.chunking.min_length)
    return [
        Chunk(
            chunk_id(doc.kind, doc.doc_id, position, text),
            text,
            {
                "kind": doc.kind,
                "group": groups_of(doc.kind, groups),
                "file": doc.file,
                "doc": doc.doc_id,
                "position": position,
                "language": doc.language,
                **doc.metadata,
            },
        )
        for position, text in enumerate(texts)
    ]


def load_all(cfg: BuildKBConfig, groups: dict[str, list[str]], root: Path) -> LoadedSources:
    """Step 1: read and chunk every source; raises KBBuildError before anything is written."""
    loaded = LoadedSources()
    for src in cfg.sources:
        if src.optional and not (root / src.path).exists():
            log.warning("optional source '%s' left out: %s not found", src.name, root / src.path)
            loaded.missing_optional.append(src.name)
            continue
        list_files(src, root)  # a missing required path fails here with a clear message
        docs = load_source(src, root, loaded.stats)
        loaded.documents += len(docs)
        chunks = [chunk for doc in docs for chunk in document_chunks(doc, cfg, groups)]
        if src.max_chunks is not None and len(chunks) > src.max_chunks:
            loaded.chunks_capped += len(chunks) - src.max_chunks
            chunks = chunks[: src.max_chunks]
        loaded.chunks[src.kind].extend(chunks)
        log.info("source %s: %d documents, %d chunks (%s)", src.name, len(docs), len(chunks), src.kind)
    for kind, chunks in loaded.chunks.items():
        unique = {c.id: c for c in chunks}
        loaded.chunks[kind] = list(unique.values())
    return loaded


def _plan(kind: str, chunks: list[Chunk], stored: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Step 2: which ids to embed, delete or relabel, and the new/changed/deleted counts."""
    new_ids = {c.id for c in chunks}
    slot = {(m.get("doc"), m.get("position")): i for i, m in stored.items()}
    new_slots = {(c.metadata["doc"], c.metadata["position"]) for c in chunks}
    to_embed = [c for c in chunks if c.id not in stored]
    to_delete = [i for i in stored if i not in new_ids]
    changed = sum(1 for c in to_embed if (c.metadata["doc"], c.metadata["position"]) in slot)
    gone = sum(1 for i in to_delete if (stored[i].get("doc"), stored[i].get("position")) not in new_slots)
    relabel = [c for c in chunks if c.id in stored and _meta_differs(stored[c.id], c.metadata)]
    return {
        "embed": to_embed,
        "delete": to_delete,
        "relabel": relabel,
        "new": len(to_embed) - changed,
        "changed": changed,
        "deleted": gone,
        "unchanged": len(chunks) - len(to_embed),
    }


def _meta_differs(stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return any(stored.get(k) != v for k, v in wanted.items() if k != "sparse")


def build_knowledge_base(
    cfg: BuildKBConfig,
    groups: dict[str, list[str]],
    *,
    root: Path | str = ".",
    embedder: Embedder | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Build the store at ``cfg.store.path`` (relative to ``root``); returns the metrics dict."""
    root = Path(root)
    start = time.perf_counter()
    loaded = load_all(cfg, groups, root)
    total_chunks = sum(len(c) for c in loaded.chunks.values())
    if total_chunks == 0:
        raise KBBuildError("no chunks from any source; check build_kb.sources and build_kb.chunking.min_length")
    embedder = embedder or build_embedder(cfg.embedder)
    store = KnowledgeStore(root / cfg.store.path, cfg.store.collection_prefix)
    plans: dict[str, dict[str, Any]] = {}
    rebuilt: list[str] = []
    for kind in KINDS:
        stored_identity = store.embedder_of(kind)
        if stored_identity is not None and stored_identity != embedder.identity:
            rebuilt.append(kind)
            stored: dict[str, dict[str, Any]] = {}
        else:
            stored = store.metadata_by_id(kind)
        plans[kind] = _plan(kind, loaded.chunks[kind], stored)
    # Step 3: embed everything needed before writing anything.
    vectors: dict[str, Any] = {}
    to_embed = sum(len(p["embed"]) for p in plans.values())
    embed_start = time.perf_counter()
    bar = tqdm(total=to_embed, desc="embedding chunks", unit="chunk", disable=not progress)
    for kind, plan in plans.items():
        texts = [c.text for c in plan["embed"]]
        parts = []
        for lo in range(0, len(texts), 256):
            parts.append(embedder.encode_documents(texts[lo : lo + 256]))
            bar.update(len(texts[lo : lo + 256]))
        vectors[kind] = parts
    bar.close()
    embed_s = time.perf_counter() - embed_start
    # Step 4: write.
    bar = tqdm(total=to_embed, desc="storing chunks", unit="chunk", disable=not progress)
    for kind, plan in plans.items():
        if kind in rebuilt:
            log.warning("kind %s was built by another embedder; rebuilding its collection", kind)
            store.drop(kind)
        if plan["delete"] and kind not in rebuilt:
            store.delete(kind, plan["delete"])
        if plan["relabel"]:
            store.update_metadata(kind, [c.id for c in plan["relabel"]], [c.metadata for c in plan["relabel"]])
        offset = 0
        for part in vectors[kind]:
            batch = plan["embed"][offset : offset + len(part.dense)]
            metas = [dict(c.metadata) for c in batch]
            if part.sparse is not None:
                for meta, weights in zip(metas, part.sparse, strict=False):
                    meta["sparse"] = sparse_to_meta(weights)
            store.upsert(kind, embedder.identity, [c.id for c in batch], [c.text for c in batch], part.dense, metas)
            offset += len(batch)
            bar.update(len(batch))
        if loaded.chunks[kind]:
            store.collection(kind, embedder.identity)
    bar.close()
    seconds = time.perf_counter() - start
    return {
        "files": loaded.stats.files,
        "empty_files_skipped": loaded.stats.empty_files,
        "documents": loaded.documents,
        "records_capped": loaded.stats.capped,
        "chunks_capped": loaded.chunks_capped,
        "chunks": total_chunks,
        "chunks_by_kind": {k: len(v) for k, v in loaded.chunks.items()},
        "stored_by_kind": {k: store.count(k) for k in KINDS},
        "new": sum(p["new"] for p in plans.values()),
        "changed": sum(p["changed"] for p in plans.values()),
        "deleted": sum(p["deleted"] for p in plans.values()),
        "unchanged": sum(p["unchanged"] for p in plans.values()),
        "relabelled": sum(len(p["relabel"]) for p in plans.values()),
        "embedded": to_embed,
        "rebuilt_kinds": rebuilt,
        "optional_sources_missing": loaded.missing_optional,
        "embedder": embedder.identity,
        "seconds": round(seconds, 3),
        "chunks_per_s": round(total_chunks / seconds, 2) if seconds else 0.0,
        "embedded_per_s": round(to_embed / embed_s, 2) if embed_s > 0 and to_embed else 0.0,
    }
