"""The Chroma store: one cosine-space collection per kind under a PersistentClient folder.

Embeddings are always given by us; collections are created with ``embedding_function=None`` so
Chroma's default embedding function (which downloads a model) is never constructed, and
telemetry is off. Each collection records the embedder identity in its metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.retrieval.config import KINDS


@dataclass
class StoredChunk:
    """A chunk as stored: id, text, metadata and (when asked) the cosine similarity to a query."""

    id: str
    text: str
    metadata: dict[str, Any]
    score: float = 0.0


def open_client(path: Path | str):
    """A PersistentClient on ``path`` with telemetry off and reset disabled."""
    import chromadb
    from chromadb.config import Settings

    Path(path).mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False, allow_reset=False))


class KnowledgeStore:
    """Collections ``<prefix><kind>`` of one Chroma folder."""

    def __init__(self, path: Path | str, prefix: str = "edumas_", *, page_size: int = 5000):
        self.path = Path(path)
        self.prefix = prefix
        self.page_size = page_size
        self.client = open_client(self.path)

    def name(self, kind: str) -> str:
        return f"{self.prefix}{kind}"

    def existing_kinds(self) -> list[str]:
        names = {c if isinstance(c, str) else c.name for c in self.client.list_collections()}
        return [k for k in KINDS if self.name(k) in names]

    def collection(self, kind: str, embedder_identity: str | None = None):
        """The collection of ``kind`` (created on demand when ``embedder_identity`` is given)."""
        if embedder_identity is None:
            return self.client.get_collection(self.name(kind), embedding_function=None)
        return self.client.get_or_create_collection(
            self.name(kind),
            metadata={"hnsw:space": "cosine", "kind": kind, "embedder": embedder_identity},
            embedding_function=None,
        )

    def embedder_of(self, kind: str) -> str | None:
        if kind not in self.existing_kinds():
            return None
        return (self.collection(kind).metadata or {}).get("embedder")

    def drop(self, kind: str) -> None:
        if kind in self.existing_kinds():
            self.client.delete_collection(self.name(kind))

    def metadata_by_id(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every stored chunk id of ``kind`` with its metadata (empty if the collection is missing)."""
        if kind not in self.existing_kinds():
            return {}
        coll = self.collection(kind)
        out: dict[str, dict[str, Any]] = {}
        while True:  # paged: one get of ~100k ids exceeds SQLite's limit on query variables
            got = coll.get(include=["metadatas"], limit=self.page_size, offset=len(out))
            out.update(zip(got["ids"], got["metadatas"], strict=True))
            if len(got["ids"]) < self.page_size:
                return out

    def count(self, kind: str) -> int:
        return self.collection(kind).count() if kind in self.existing_kinds() else 0

    def _batches(self, n: int):
        size = max(1, min(5000, self.client.get_max_batch_size()))
        return [(i, min(n, i + size)) for i in range(0, n, size)]

    def upsert(self, kind: str, identity: str, ids: list[str], texts: list[str], vectors: np.ndarray, metas) -> None:
        coll = self.collection(kind, identity)
        for lo, hi in self._batches(len(ids)):
            coll.upsert(ids=ids[lo:hi], documents=texts[lo:hi], embeddings=vectors[lo:hi], metadatas=metas[lo:hi])

    def update_metadata(self, kind: str, ids: list[str], metas: list[dict[str, Any]]) -> None:
        coll = self.collection(kind)
        for lo, hi in self._batches(len(ids)):
            coll.update(ids=ids[lo:hi], metadatas=metas[lo:hi])

    def delete(self, kind: str, ids: list[str]) -> None:
        coll = self.collection(kind)
        for lo, hi in self._batches(len(ids)):
            coll.delete(ids=ids[lo:hi])

    def query(
        self, kind: str, vectors: np.ndarray, k: int, where: dict[str, Any] | None = None
    ) -> list[list[StoredChunk]]:
        """Top-``k`` chunks of ``kind`` for each query vector, best first (score = cosine similarity)."""
        if kind not in self.existing_kinds():
            return [[] for _ in range(len(vectors))]
        coll = self.collection(kind)
        n = min(k, coll.count())
        if n == 0:
            return [[] for _ in range(len(vectors))]
        got = coll.query(
            query_embeddings=np.asarray(vectors, dtype=np.float32),
            n_results=n,
            where=where or None,
            include=["documents", "metadatas", "distances"],
        )
        out = []
        rows = zip(got["ids"], got["documents"], got["metadatas"], got["distances"], strict=True)
        for ids, docs, metas, dists in rows:
            hits = zip(ids, docs, metas, dists, strict=True)
            out.append([StoredChunk(i, t, m, 1.0 - float(d)) for i, t, m, d in hits])
        return out


def sparse_to_meta(weights: dict[str, float] | None) -> str:
    """Lexical weights stored as compact JSON in chunk metadata (Chroma metadata is scalar)."""
    return json.dumps({k: round(v, 4) for k, v in (weights or {}).items()}, separators=(",", ":"))
