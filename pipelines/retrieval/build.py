"""Build (or incrementally rebuild) the knowledge bases from the configured sources, streamed.

Order matters for safety: (1) every source is read, validated and chunked (only chunk ids are
kept); (2) the store's ids and metadata digests are read; (3) the sources are read again and only
new chunks are embedded, batch by batch, into a spill folder on disk (:mod:`spill`); (4) only then
is the store written: new chunks first, then changed metadata, then deletions, so a crash
mid-write never leaves a kind half empty. A kind built from empty (new, or built by another
embedder) is written under a staging name and swapped in when complete. Any error in steps 1-3 (a
corrupt file, a wrong CSV field, a missing folder, a model that fails) leaves the previous
knowledge base exactly as it was and still queryable. Memory holds ids, never all texts or vectors.

Chunk ids come from the document id and the chunk's text (:mod:`chunks`); chunks whose document
disappeared are deleted.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipelines.retrieval.chunks import Chunk, LoadedSources, chunk_id, iter_chunks, load_all, meta_digest
from pipelines.retrieval.config import KINDS, BuildKBConfig
from pipelines.retrieval.embedder_choice import build_embedder
from pipelines.retrieval.embedders import Embedder
from pipelines.retrieval.loaders import KBBuildError
from pipelines.retrieval.spill import Spill
from pipelines.retrieval.store import KnowledgeStore, sparse_to_meta

__all__ = ["Chunk", "LoadedSources", "build_knowledge_base", "chunk_id", "iter_chunks", "load_all"]
log = logging.getLogger(__name__)
EMBED_BATCH = 256
WRITE_BATCH = 256  # rows per Chroma write: bounds the vectors (and Chroma's copies) in memory


@dataclass
class KindPlan:
    """What the build does to one kind: ``wanted`` ids (step 1), ``stored`` id -> (document, metadata
    digest) of the chunks not yet matched (step 2; what is left at the end is deleted)."""

    kind: str
    wanted: set[str] = field(default_factory=set)
    stored: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    rebuild: bool = False
    replaced: bool = False
    chunks: int = 0
    unchanged: int = 0
    added: Counter[str] = field(default_factory=Counter)
    spill: Spill | None = None

    def counts(self) -> dict[str, int]:
        """new / changed / deleted: per document, an added chunk paired with a removed one is a change."""
        removed = Counter(doc for doc, _ in self.stored.values())
        changed = sum(min(n, removed[doc]) for doc, n in self.added.items())
        return {
            "new": sum(self.added.values()) - changed,
            "changed": changed,
            "deleted": sum(removed.values()) - changed,
        }


def _plan_kinds(store: KnowledgeStore, identity: str, loaded_ids: dict[str, dict[str, bytes]]) -> dict[str, KindPlan]:
    plans = {}
    for kind in KINDS:  # a copy: step 3 empties ``wanted``, the manifest's digests need every id
        plan = KindPlan(kind, wanted=set(loaded_ids[kind]), chunks=len(loaded_ids[kind]))
        stored_identity = store.embedder_of(kind)
        plan.rebuild = stored_identity != identity
        plan.replaced = stored_identity is not None and plan.rebuild
        if not plan.rebuild:
            plan.stored = {
                chunk_id: (sys.intern(str(meta.get("doc"))), meta_digest(meta))
                for chunk_id, meta in store.iter_metadata(kind)
            }
        plans[kind] = plan
    return plans


def _embed_into_spill(
    chunks: Iterator[Chunk], plans: dict[str, KindPlan], embedder: Embedder, folder: Path, bar: tqdm
) -> None:
    """Step 3: embed every chunk that is not stored yet into the spill files; note relabels."""
    pending: dict[str, list[Chunk]] = {k: [] for k in KINDS}

    def flush(kind: str) -> None:
        batch, plan = pending[kind], plans[kind]
        if not batch:
            return
        encoded = embedder.encode_documents([c.text for c in batch])
        metas = [dict(c.metadata) for c in batch]
        if encoded.sparse is not None:
            for meta, weights in zip(metas, encoded.sparse, strict=False):
                meta["sparse"] = sparse_to_meta(weights)
        plan.spill = plan.spill or Spill(folder, kind)
        plan.spill.add([c.id for c in batch], [c.text for c in batch], metas, encoded.dense)
        bar.update(len(batch))
        pending[kind] = []

    for chunk in chunks:
        kind = chunk.metadata["kind"]
        plan = plans[kind]
        if chunk.id not in plan.wanted:
            continue  # a duplicate of a chunk already handled
        plan.wanted.discard(chunk.id)
        if chunk.id in plan.stored:
            _, digest = plan.stored.pop(chunk.id)
            if digest != meta_digest(chunk.metadata):
                plan.spill = plan.spill or Spill(folder, kind)
                plan.spill.add_relabel(chunk.id, chunk.metadata)
            else:
                plan.unchanged += 1
            continue
        plan.added[chunk.metadata["doc"]] += 1
        pending[kind].append(chunk)
        if len(pending[kind]) >= EMBED_BATCH:
            flush(kind)
    for kind in KINDS:
        flush(kind)


def _write(store: KnowledgeStore, plan: KindPlan, identity: str, bar: tqdm) -> None:
    """Step 4 for one kind: new chunks, then metadata changes, then deletions (or a staging swap)."""
    spill, kind = plan.spill, plan.kind
    if plan.rebuild:
        if not plan.chunks:
            store.drop(kind)  # nothing of this kind any more: no vectors of another embedder left behind
            return
        if plan.replaced:
            log.warning("kind %s was built by another embedder; rebuilding it under a staging name", kind)
        staging = store.staging(kind, identity)
        for ids, texts, vectors, metas in spill.batches(WRITE_BATCH) if spill else ():
            store.upsert(kind, identity, ids, texts, vectors, metas, name=staging)
            bar.update(len(ids))
        store.promote(kind)
        return
    for ids, texts, vectors, metas in spill.batches(WRITE_BATCH) if spill else ():
        store.upsert(kind, identity, ids, texts, vectors, metas)
        bar.update(len(ids))
    for ids, metas in spill.relabel_batches(WRITE_BATCH) if spill else ():
        store.update_metadata(kind, ids, metas)
    if plan.stored:
        store.delete(kind, list(plan.stored))


def _ids_digest(ids: dict[str, bytes]) -> str:
    """sha256 of a kind's sorted chunk ids, each with its metadata digest: equal exactly when the stored
    chunks are (ids come from the document id and the text; the metadata digest adds labels and groups)."""
    return hashlib.sha256("\n".join(f"{i} {ids[i].hex()}" for i in sorted(ids)).encode()).hexdigest()


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
    loaded = LoadedSources()
    ids: dict[str, dict[str, bytes]] = {k: {} for k in KINDS}  # id -> metadata digest (8 bytes)
    for chunk in iter_chunks(cfg, groups, root, loaded):  # step 1: validate everything, keep ids
        ids[chunk.metadata["kind"]].setdefault(chunk.id, meta_digest(chunk.metadata))
    total_chunks = sum(len(v) for v in ids.values())
    if total_chunks == 0:
        raise KBBuildError("no chunks from any source; check build_kb.sources and build_kb.chunking.min_length")
    embedder = embedder or build_embedder(cfg.embedder)
    store = KnowledgeStore.open(cfg.store, root)
    store.recover()
    plans = _plan_kinds(store, embedder.identity, ids)  # step 2
    to_embed = sum(1 for p in plans.values() for i in p.wanted if i not in p.stored)
    with tempfile.TemporaryDirectory(prefix="edumas-kb-spill-") as folder:
        embed_start = time.perf_counter()
        bar = tqdm(total=to_embed, desc="embedding chunks", unit="chunk", disable=not progress)
        _embed_into_spill(iter_chunks(cfg, groups, root, LoadedSources()), plans, embedder, Path(folder), bar)
        bar.close()
        embed_s = time.perf_counter() - embed_start
        bar = tqdm(total=to_embed, desc="storing chunks", unit="chunk", disable=not progress)
        for plan in plans.values():
            _write(store, plan, embedder.identity, bar)
        bar.close()
    seconds = time.perf_counter() - start
    counts = [p.counts() for p in plans.values()]
    return {
        "files": loaded.stats.files,
        "empty_files_skipped": loaded.stats.empty_files,
        "documents": loaded.documents,
        "records_capped": loaded.stats.capped,
        "chunks_capped": loaded.chunks_capped,
        "chunks": total_chunks,
        "chunks_by_kind": {k: p.chunks for k, p in plans.items()},
        "chunk_ids_sha256": {k: _ids_digest(v) for k, v in ids.items()},
        "stored_by_kind": {k: store.count(k) for k in KINDS},
        "new": sum(c["new"] for c in counts),
        "changed": sum(c["changed"] for c in counts),
        "deleted": sum(c["deleted"] for c in counts),
        "unchanged": sum(p.unchanged for p in plans.values()),
        "relabelled": sum(p.spill.relabels for p in plans.values() if p.spill),
        "embedded": to_embed,
        "rebuilt_kinds": [k for k, p in plans.items() if p.replaced],
        "optional_sources_missing": loaded.missing_optional,
        "embedder": embedder.identity,
        "seconds": round(seconds, 3),
        "chunks_per_s": round(total_chunks / seconds, 2) if seconds else 0.0,
        "embedded_per_s": round(to_embed / embed_s, 2) if embed_s > 0 and to_embed else 0.0,
    }
