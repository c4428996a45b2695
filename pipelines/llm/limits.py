"""One concurrency limit for every LLM call of a run, waiting calls served first come, first served.

The runner installs a :class:`CallLimiter` in a context variable; every LLM call enters
``call_slot()`` inside ``LLM.chat`` after a cache miss (a hit holds no slot), and anything else
that should share the limit enters it too. Tasks created with ``asyncio.gather`` inherit the
context, so a team's parallel agents need no plumbing. Waiting calls are granted in order of
their priority (``install(limiter, priority)``; the runner gives every sample 0), then of arrival.

Why arrival order and not "older samples first" (each sample's ordinal as its priority, as
before): when a step of many samples is wider than the free slots, ordinal priority lets the
low samples take every slot step after step while the high ones stall and finish alone at the
end, one call at a time. 50 RAM2C dialogues at concurrency 128, one-second calls: the dialogue
phase needs 23 rounds with ordinal priority and 16 in arrival order; measured 20.3 s -> 18.4 s
(kgc_throughput 1.072 -> 1.044, tagging_throughput unchanged). The runner's admission window
still bounds the samples in flight. Outside a run ``call_slot()`` does not limit anything.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager


class CallLimiter:
    """A priority semaphore: at most ``limit`` holders; lowest priority number is served first."""

    def __init__(self, limit: int, *, on_release: Callable[[CallLimiter], None] | None = None):
        if limit < 1:
            raise ValueError(f"concurrency limit must be >= 1, got {limit}")
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self.done = 0  # slots released: the LLM calls of the run that finished (cache hits hold none)
        self.on_release = on_release  # called after each release (the runner's progress bar)
        self.active_samples = 0  # samples the runner has started and not finished (batch mode's waves)
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._counter = itertools.count()

    async def acquire(self, priority: int = 0) -> None:
        if self.in_use < self.limit and not self._waiters:
            self._take()
            return
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._counter), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted and cancelled at once: pass the slot on
            raise

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot (a batch mode's wave is complete when every other call waits on it)."""
        return len(self._waiters)

    def _take(self) -> None:
        self.in_use += 1
        self.peak = max(self.peak, self.in_use)

    def release(self) -> None:
        self.in_use -= 1
        self.done += 1
        while self._waiters and self.in_use < self.limit:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                self._take()
                future.set_result(None)
        if self.on_release is not None:
            self.on_release(self)


_limiter: contextvars.ContextVar[CallLimiter | None] = contextvars.ContextVar("edumas_call_limiter", default=None)
_priority: contextvars.ContextVar[int] = contextvars.ContextVar("edumas_call_priority", default=0)
_sample: contextvars.ContextVar[int | None] = contextvars.ContextVar("edumas_call_sample", default=None)


def install(limiter: CallLimiter | None, priority: int = 0, *, sample: int | None = None) -> None:
    """Make ``limiter``, ``priority`` and the sample's index current for this task and the tasks it creates."""
    _limiter.set(limiter)
    _priority.set(priority)
    _sample.set(sample)


def current_sample() -> int | None:
    """The index of the runner's sample this task works for (None outside a run)."""
    return _sample.get()


def current() -> tuple[CallLimiter | None, int]:
    """The current run's limiter (None outside a run) and this task's priority, for callers that
    take and release a slot themselves (``LLM.chat``: no context-manager object per call)."""
    return _limiter.get(), _priority.get()


@asynccontextmanager
async def call_slot() -> AsyncIterator[None]:
    """Hold one slot of the current run's limit (no limit outside a run)."""
    limiter = _limiter.get()
    if limiter is None:
        yield
        return
    await limiter.acquire(_priority.get())
    try:
        yield
    finally:
        limiter.release()
