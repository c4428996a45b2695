"""The Chroma store: one cosine-space collection per kind under a PersistentClient folder, or on a
Chroma server (``build_kb.store.backend: server``, chromadb's HttpClient: many shards, one store).

Embeddings are always given by us; collections are created with ``embedding_function=None`` so
Chroma's default embedding function (which downloads a model) is never constructed, and
telemetry is off. The distance is set through Chroma's collection configuration
(``{"hnsw": {"space": "cosine"}}``); each collection records the embedder identity in its metadata.

A kind built from empty (new, or replaced because another embedder built it) is written under a
staging name ``<name>__partial``, renamed ``<name>__complete`` once every chunk is in, then swapped
in for the old collection (:meth:`KnowledgeStore.promote`). A crash never leaves a kind half empty:
:meth:`KnowledgeStore.recover` drops a partial staging collection and finishes a complete one.

Queries reuse each kind's collection handle and chunk count (a generation stage's store is read
only: looking them up cost three Chroma calls per query); every write through the store forgets
them, so the next query sees the written chunks.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.retrieval.config import KINDS, ChromaServerConfig, StoreConfig
from pipelines.retrieval.loading import collector_paused
from pipelines.stage import StageError

log = logging.getLogger(__name__)
PARTIAL = "__partial"
COMPLETE = "__complete"
COSINE = {"hnsw": {"space": "cosine"}}


@dataclass
class StoredChunk:
    """A chunk as stored: id, text, metadata and (when asked) the cosine similarity to a query."""

    id: str
    text: str
    metadata: dict[str, Any]
    score: float = 0.0


def open_client(path: Path | str):
    """A PersistentClient on ``path`` with telemetry off and reset disabled."""
    with collector_paused():
        import chromadb
        from chromadb.config import Settings

    Path(path).mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False, allow_reset=False))


class StoreUnavailable(StageError):
    """The knowledge base's server cannot be reached (the stage ends with this message, exit code 1)."""


def open_server_client(server: ChromaServerConfig):
    """An HttpClient on a running Chroma server; :class:`StoreUnavailable` says how to start one."""
    with collector_paused():
        import chromadb
        from chromadb.config import Settings

    headers = {}
    if server.token_env:
        token = os.environ.get(server.token_env)
        if not token:
            raise StoreUnavailable(
                f"environment variable {server.token_env} (build_kb.store.server.token_env) is not set"
            )
        headers["Authorization"] = f"Bearer {token}"
    where = f"{'https' if server.ssl else 'http'}://{server.host}:{server.port}"
    try:
        client = chromadb.HttpClient(
            host=server.host,
            port=server.port,
            ssl=server.ssl,
            headers=headers or None,
            settings=Settings(anonymized_telemetry=False, allow_reset=False),
        )
        client.heartbeat()
    except Exception as exc:  # connection refused, DNS, TLS, HTTP errors: all mean "no usable server"
        raise StoreUnavailable(
            f"no Chroma server answers at {where} (build_kb.store.server): {type(exc).__name__}: {exc}; start one "
            f"with `chroma run --path <build_kb.store.path> --host {server.host} --port {server.port}`, or set "
            "build_kb.store.backend: persistent"
        ) from None
    return client


class KnowledgeStore:
    """Collections ``<prefix><kind>`` of one Chroma folder, or of a Chroma server (``server``)."""

    def __init__(
        self,
        path: Path | str,
        prefix: str = "edumas_",
        *,
        page_size: int = 5000,
        server: ChromaServerConfig | None = None,
    ):
        self.path = Path(path)
        self.prefix = prefix
        self.page_size = page_size
        self.server = server
        self.client = open_server_client(server) if server is not None else open_client(self.path)
        self._readers: dict[str, tuple[Any, int]] = {}  # kind -> (collection or None, count)

    @classmethod
    def open(cls, cfg: StoreConfig, root: Path | str = ".") -> KnowledgeStore:
        """The store ``cfg`` names: its folder under ``root``, or its server (``backend: server``)."""
        server = cfg.server if cfg.backend == "server" else None
        return cls(Path(root) / cfg.path, cfg.collection_prefix, server=server)

    @property
    def where(self) -> str:
        """The folder or the server URL, for messages."""
        if self.server is None:
            return str(self.path)
        return f"{'https' if self.server.ssl else 'http'}://{self.server.host}:{self.server.port}"

    def name(self, kind: str) -> str:
        return f"{self.prefix}{kind}"

    def _forget(self) -> None:
        """A write: the cached collection handles and counts may be stale."""
        self._readers.clear()

    def _reader(self, kind: str) -> tuple[Any, int]:
        """``(collection, count)`` of ``kind`` (``(None, 0)`` if missing), looked up once until a write."""
        if kind not in self._readers:
            coll = self.collection(kind) if kind in self.existing_kinds() else None
            self._readers[kind] = (coll, coll.count() if coll is not None else 0)
        return self._readers[kind]

    def _names(self) -> set[str]:
        return {c if isinstance(c, str) else c.name for c in self.client.list_collections()}

    def existing_kinds(self) -> list[str]:
        names = self._names()
        return [k for k in KINDS if self.name(k) in names]

    def collection(self, kind: str, embedder_identity: str | None = None, *, name: str | None = None):
        """The collection of ``kind`` (created on demand when ``embedder_identity`` is given);
        ``name`` addresses a staging collection instead of the live one."""
        name = name or self.name(kind)
        if embedder_identity is None:
            return self.client.get_collection(name, embedding_function=None)
        self._forget()
        return self.client.get_or_create_collection(
            name,
            configuration=COSINE,
            metadata={"kind": kind, "embedder": embedder_identity},
            embedding_function=None,
        )

    def embedder_of(self, kind: str) -> str | None:
        if kind not in self.existing_kinds():
            return None
        return (self.collection(kind).metadata or {}).get("embedder")

    def drop(self, kind: str, *, name: str | None = None) -> None:
        name = name or self.name(kind)
        self._forget()
        if name in self._names():
            self.client.delete_collection(name)

    def staging(self, kind: str, embedder_identity: str) -> str:
        """A fresh, empty staging collection for rebuilding ``kind``; returns its name."""
        name = self.name(kind) + PARTIAL
        self.drop(kind, name=name)
        self.collection(kind, embedder_identity, name=name)
        return name

    def promote(self, kind: str) -> None:
        """Swap the fully written staging collection of ``kind`` in for the live one."""
        partial, complete = self.name(kind) + PARTIAL, self.name(kind) + COMPLETE
        self._forget()
        if partial in self._names():
            self.client.get_collection(partial, embedding_function=None).modify(name=complete)
        self.drop(kind)
        self.client.get_collection(complete, embedding_function=None).modify(name=self.name(kind))

    def recover(self) -> list[str]:
        """Finish swaps a crash interrupted and drop half-written staging collections; returns the
        kinds whose staging collection was promoted."""
        names = self._names()
        promoted = []
        for kind in KINDS:
            if self.name(kind) + PARTIAL in names:
                log.warning("dropping the half-written staging collection of %s (an interrupted build)", kind)
                self.drop(kind, name=self.name(kind) + PARTIAL)
            if self.name(kind) + COMPLETE in names:
                log.warning("finishing the interrupted swap of %s's rebuilt collection", kind)
                self.promote(kind)
                promoted.append(kind)
        return promoted

    def iter_metadata(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, metadata) of every stored chunk of ``kind``, read in pages (nothing if missing)."""
        if kind not in self.existing_kinds():
            return
        coll = self.collection(kind)
        offset = 0
        while True:  # paged: one get of ~100k ids exceeds SQLite's limit on query variables
            got = coll.get(include=["metadatas"], limit=self.page_size, offset=offset)
            yield from zip(got["ids"], got["metadatas"], strict=True)
            offset += len(got["ids"])
            if len(got["ids"]) < self.page_size:
                return

    def metadata_by_id(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every stored chunk id of ``kind`` with its metadata (empty if the collection is missing)."""
        return dict(self.iter_metadata(kind))

    def count(self, kind: str) -> int:
        return self.collection(kind).count() if kind in self.existing_kinds() else 0

    def _batches(self, n: int):
        size = max(1, min(5000, self.client.get_max_batch_size()))
        return [(i, min(n, i + size)) for i in range(0, n, size)]

    def upsert(
        self,
        kind: str,
        identity: str,
        ids: list[str],
        texts: list[str],
        vectors: np.ndarray,
        metas,
        *,
        name: str | None = None,
    ) -> None:
        coll = self.collection(kind, identity, name=name)
        self._forget()
        for lo, hi in self._batches(len(ids)):
            coll.upsert(ids=ids[lo:hi], documents=texts[lo:hi], embeddings=vectors[lo:hi], metadatas=metas[lo:hi])

    def update_metadata(
        self, kind: str, ids: list[str], metas: list[dict[str, Any]], *, keep: tuple[str, ...] = ("sparse",)
    ) -> None:
        """Replace the metadata of ``ids`` by ``metas``. Chroma's update merges, so keys the stored
        metadata has and ``metas`` lacks are sent as ``None`` (deleted), except the ``keep`` keys."""
        coll = self.collection(kind)
        self._forget()
        for lo, hi in self._batches(len(ids)):
            got = coll.get(ids=ids[lo:hi], include=["metadatas"])
            stored = dict(zip(got["ids"], got["metadatas"], strict=True))
            batch = []
            for chunk_id, meta in zip(ids[lo:hi], metas[lo:hi], strict=True):
                gone = set(stored.get(chunk_id) or {}) - set(meta) - set(keep)
                batch.append({**meta, **dict.fromkeys(sorted(gone))})
            coll.update(ids=ids[lo:hi], metadatas=batch)

    def delete(self, kind: str, ids: list[str]) -> None:
        coll = self.collection(kind)
        self._forget()
        for lo, hi in self._batches(len(ids)):
            coll.delete(ids=ids[lo:hi])

    def query(
        self, kind: str, vectors: np.ndarray, k: int, where: dict[str, Any] | None = None
    ) -> list[list[StoredChunk]]:
        """Top-``k`` chunks of ``kind`` for each query vector, best first (score = cosine similarity)."""
        coll, count = self._reader(kind)
        n = min(k, count)
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
