"""Chunks with content-based ids, streamed from the configured sources.

Chunk id = ``<kind>-`` + sha1(document id, chunk text, occurrence of that text in the document)[:20];
the chunk's position is metadata. Inserting a sentence re-embeds only the chunks it changes (the
later chunks keep their ids and get their new position as a metadata update).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.retrieval.chunking import chunk_text
from pipelines.retrieval.config import KINDS, BuildKBConfig, SourceConfig
from pipelines.retrieval.loaders import Document, LoadStats, iter_documents, list_files

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


def chunk_id(kind: str, doc_id: str, text: str, occurrence: int = 0) -> str:
    digest = hashlib.sha1(f"{doc_id}\x1f{text}\x1f{occurrence}".encode()).hexdigest()[:20]
    return f"{kind}-{digest}"


def meta_digest(meta: dict[str, Any]) -> bytes:
    """Short digest of chunk metadata (key set and values; the sparse weights left out)."""
    plain = {k: v for k, v in meta.items() if k != "sparse"}
    return hashlib.blake2b(json.dumps(plain, sort_keys=True, ensure_ascii=False).encode(), digest_size=8).digest()


def groups_of(kind: str, groups: dict[str, list[str]]) -> str:
    """Comma-separated expert groups that read ``kind`` (metadata ``group``)."""
    return ",".join(sorted(g for g, kinds in groups.items() if kind in kinds)) or "none"


def document_chunks(doc: Document, cfg: BuildKBConfig, groups: dict[str, list[str]]) -> list[Chunk]:
    size, overlap, min_length = cfg.chunking.size, cfg.chunking.overlap, cfg.chunking.min_length
    texts = chunk_text(doc.text, size, overlap, min_length, line_breaks=doc.line_breaks)
    seen: Counter[str] = Counter()
    doc_id = sys.intern(doc.doc_id)
    chunks = []
    for position, text in enumerate(texts):
        meta = {
            "kind": doc.kind,
            "group": groups_of(doc.kind, groups),
            "file": doc.file,
            "doc": doc_id,
            "position": position,
            "language": doc.language,
            **doc.metadata,
        }
        chunks.append(Chunk(chunk_id(doc.kind, doc_id, text, seen[text]), text, meta))
        seen[text] += 1
    return chunks


def _source_chunks(
    src: SourceConfig, cfg: BuildKBConfig, groups: dict[str, list[str]], root: Path, loaded: LoadedSources
) -> Iterator[Chunk]:
    """The chunks of one source in order, at most ``max_chunks`` (the rest are counted as capped)."""
    kept = 0
    for doc in iter_documents(src, root, loaded.stats):
        loaded.documents += 1
        for chunk in document_chunks(doc, cfg, groups):
            if src.max_chunks is not None and kept >= src.max_chunks:
                loaded.chunks_capped += 1
                continue
            kept += 1
            yield chunk


def iter_chunks(cfg: BuildKBConfig, groups: dict[str, list[str]], root: Path, loaded: LoadedSources) -> Iterator[Chunk]:
    """Every chunk of every source (missing optional sources are noted in ``loaded`` and skipped)."""
    present = []
    for src in cfg.sources:
        if src.optional and not (root / src.path).exists():
            log.warning("optional source '%s' left out: %s not found", src.name, root / src.path)
            loaded.missing_optional.append(src.name)
            continue
        list_files(src, root)  # a missing required path fails here, before any source is read
        present.append(src)
    for src in present:
        yield from _source_chunks(src, cfg, groups, root, loaded)


def load_all(cfg: BuildKBConfig, groups: dict[str, list[str]], root: Path) -> LoadedSources:
    """Every chunk in memory, duplicates (same id) removed: for tests and small corpora only."""
    loaded = LoadedSources()
    for chunk in iter_chunks(cfg, groups, root, loaded):
        loaded.chunks[chunk.metadata["kind"]].append(chunk)
    for kind, chunks in loaded.chunks.items():
        loaded.chunks[kind] = list({c.id: c for c in chunks}.values())
    return loaded
