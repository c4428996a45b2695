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
query fails the searches of its batch group only. Each event loop has its own queue.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass, field
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


@dataclass
class _Queue:
    """One event loop's searches waiting for the next batch, and the task that runs the batches."""

    pending: list[_Search] = field(default_factory=list)
    drain: asyncio.Task | None = None


class SearchBatcher:
    """Batches :meth:`KnowledgeStore.query` calls of concurrent searches (see the module docstring)."""

    def __init__(self, store: KnowledgeStore):
        self.store = store
        self.queries = 0  # Chroma queries made (one per kind per batch group)
        self._loops: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> _Queue

    async def search(self, kinds: list[str], vectors: np.ndarray, k: int, where: dict | None = None) -> PerKind:
        """The top-``k`` chunks of every vector in every kind: ``result[kind_index][vector_index]``."""
        loop = asyncio.get_running_loop()
        queue = self._loops.get(loop)
        if queue is None:
            queue = self._loops[loop] = _Queue()
        item = _Search(tuple(kinds), np.asarray(vectors, dtype=np.float32), k, where, loop.create_future())
        queue.pending.append(item)
        if queue.drain is None:
            queue.drain = asyncio.ensure_future(self._run_batches(queue))
        return await item.future

    async def _run_batches(self, queue: _Queue) -> None:
        try:
            while queue.pending:
                batch, queue.pending = queue.pending, []
                outcomes = await asyncio.to_thread(self._query, batch)
                for item, outcome in zip(batch, outcomes, strict=True):
                    if item.future.done():  # its caller was cancelled
                        continue
                    if isinstance(outcome, BaseException):
                        item.future.set_exception(outcome)
                    else:
                        item.future.set_result(outcome)
        finally:
            queue.drain = None
            for item in queue.pending:  # only left when this task itself was cancelled
                if not item.future.done():
                    item.future.cancel()
            queue.pending = []

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
