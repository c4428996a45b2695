"""Store searches of concurrent retrievals merged into one Chroma query per kind.

Many samples retrieve at the same moment (every dialogue's expert group starts when its drafter
replies); each Chroma query costs about 1 ms of fixed work (listing collections, opening the
collection, counting it) besides the search itself, all of it holding the interpreter while the
event loop waits. :class:`SearchBatcher` runs one batch at a time in a worker thread: a search that
arrives while a batch runs waits and joins the next one, so an idle retriever answers at once and
a busy one answers everything that queued up with one query per kind::

    batcher = SearchBatcher(store)
    per_kind = await batcher.search(["psychology"], vectors, k=10, where=None)
    per_kind[0][i]      # the top-k StoredChunks of vector i in the first kind, best first

Only searches with the same kinds, ``k`` and ``where`` share a query. Chroma searches every vector
of a query on its own, so each vector's hits are exactly those of a query of its own. A failing
query fails the searches of its batch group only.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.retrieval.store import KnowledgeStore, StoredChunk

PerKind = list[list[list[StoredChunk]]]  # [kind][vector] -> chunks


@dataclass
class _Search:
    kinds: tuple[str, ...]
    vectors: np.ndarray
    k: int
    where: dict[str, Any] | None
    future: asyncio.Future

    @property
    def key(self) -> tuple:
        return self.kinds, self.k, json.dumps(self.where, sort_keys=True, default=str) if self.where else ""


class SearchBatcher:
    """Batches :meth:`KnowledgeStore.query` calls of concurrent searches (see the module docstring)."""

    def __init__(self, store: KnowledgeStore):
        self.store = store
        self.queries = 0  # Chroma queries made (one per kind per batch group)
        self._pending: list[_Search] = []
        self._drain: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def search(self, kinds: list[str], vectors: np.ndarray, k: int, where: dict | None = None) -> PerKind:
        """The top-``k`` chunks of every vector in every kind: ``result[kind_index][vector_index]``."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop: whatever an old one left behind is gone
            self._loop, self._pending, self._drain = loop, [], None
        item = _Search(tuple(kinds), np.asarray(vectors, dtype=np.float32), k, where, loop.create_future())
        self._pending.append(item)
        if self._drain is None:
            self._drain = asyncio.ensure_future(self._run_batches())
        return await item.future

    async def _run_batches(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                outcomes = await asyncio.to_thread(self._query, batch)
                for item, outcome in zip(batch, outcomes, strict=True):
                    if item.future.done():  # its caller was cancelled
                        continue
                    if isinstance(outcome, BaseException):
                        item.future.set_exception(outcome)
                    else:
                        item.future.set_result(outcome)
        finally:
            self._drain = None
            for item in self._pending:  # only left when this task itself was cancelled
                if not item.future.done():
                    item.future.cancel()
            self._pending = []

    def _query(self, batch: list[_Search]) -> list[PerKind | BaseException]:
        """Worker thread: one store query per kind for each group of searches that can share one."""
        outcomes: list[PerKind | BaseException | None] = [None] * len(batch)
        groups: dict[tuple, list[int]] = {}
        for i, item in enumerate(batch):
            groups.setdefault(item.key, []).append(i)
        for members in groups.values():
            first = batch[members[0]]
            try:
                stacked = np.concatenate([batch[i].vectors for i in members])
                per_kind = []
                for kind in first.kinds:
                    per_kind.append(self.store.query(kind, stacked, first.k, first.where))
                    self.queries += 1
            except Exception as exc:  # this group's searches fail; the other groups still get answers
                for i in members:
                    outcomes[i] = exc
                continue
            start = 0
            for i in members:
                stop = start + len(batch[i].vectors)
                outcomes[i] = [hits[start:stop] for hits in per_kind]
                start = stop
        return outcomes
