"""Dynamic micro-batching: concurrent requests are gathered and processed together.

``MicroBatcher(process, max_batch_size=16, max_wait_s=0.01)`` hands ``await submit(item)`` calls
to one worker task per event loop. The worker takes the oldest waiting item, waits at most
``max_wait_s`` after it arrived for more (or until the batch is full), then runs
``process(items) -> results`` ONCE in a worker thread, so the event loop stays free while a batch
is computed. Items that arrive meanwhile form the next batch. ``size_of(item)`` says how much of
``max_batch_size`` an item takes (e.g. its number of sequences); an item larger than the limit
runs alone. An exception from ``process`` is raised to every caller of that batch.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass
class _Pending:
    item: Any
    future: asyncio.Future
    arrived: float


@dataclass
class _LoopState:
    pending: deque = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    worker: asyncio.Task | None = None


class MicroBatcher(Generic[Item, Result]):
    """Collects concurrent ``submit`` calls into batches for one blocking ``process`` call each."""

    def __init__(
        self,
        process: Callable[[list[Item]], Sequence[Result]],
        *,
        max_batch_size: int,
        max_wait_s: float,
        size_of: Callable[[Item], int] = lambda item: 1,
    ):
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        self.process = process
        self.max_batch_size = max_batch_size
        self.max_wait_s = max(0.0, max_wait_s)
        self.size_of = size_of
        self.batches = 0
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        for old in [lp for lp in self._states if lp.is_closed()]:
            del self._states[old]
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState()
        if state.worker is None or state.worker.done():
            state.worker = loop.create_task(self._work(state), name="micro-batcher")
        return state

    async def submit(self, item: Item) -> Result:
        """Queue ``item``; returns its result once the batch holding it has been processed."""
        state = self._state()
        future = asyncio.get_running_loop().create_future()
        state.pending.append(_Pending(item, future, time.monotonic()))
        state.wakeup.set()
        return await future

    def _take_batch(self, pending: deque) -> list[_Pending]:
        batch, used = [], 0
        while pending:
            size = max(1, self.size_of(pending[0].item))
            if batch and used + size > self.max_batch_size:
                break
            entry = pending.popleft()
            if entry.future.cancelled():
                continue
            batch.append(entry)
            used += size
        return batch

    def _pending_size(self, pending: deque) -> int:
        return sum(max(1, self.size_of(p.item)) for p in pending)

    async def _work(self, state: _LoopState) -> None:
        while True:
            if not state.pending:
                state.wakeup.clear()
                await state.wakeup.wait()
                continue
            deadline = state.pending[0].arrived + self.max_wait_s
            while self._pending_size(state.pending) < self.max_batch_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                state.wakeup.clear()
                try:
                    await asyncio.wait_for(state.wakeup.wait(), remaining)
                except TimeoutError:
                    break
            batch = self._take_batch(state.pending)
            if not batch:
                continue
            self.batches += 1
            try:
                results = await asyncio.to_thread(self.process, [entry.item for entry in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"batch processor returned {len(results)} results for {len(batch)} items")
            except Exception as exc:  # every caller of this batch sees the failure
                for entry in batch:
                    if not entry.future.done():
                        entry.future.set_exception(exc)
                continue
            for entry, result in zip(batch, results, strict=True):
                if not entry.future.done():
                    entry.future.set_result(result)

    async def close(self) -> None:
        """Stop the worker of the running loop (pending callers get ``CancelledError``)."""
        loop = asyncio.get_running_loop()
        state = self._states.pop(loop, None)
        if state is None:
            return
        for entry in state.pending:
            entry.future.cancel()
        if state.worker is not None:
            state.worker.cancel()
            try:
                await state.worker
            except (asyncio.CancelledError, Exception):
                pass
