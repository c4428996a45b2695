"""Client-side rate limits for remote LLM APIs: requests per minute and tokens per minute.

Each limit is a GCRA ("generic cell rate algorithm", a token bucket written as a schedule):
a request of cost ``c`` is given the earliest start time at which the running average stays at
or below ``limit / 60`` per second, and that slot is reserved at once, so waiting callers start
in arrival order and never in a burst. Token costs are estimates made before the call
(:func:`estimate_tokens`); :meth:`RateLimiter.settle` corrects the schedule with the usage the
server reports afterwards.

    limiter = RateLimiter(requests_per_minute=500, tokens_per_minute=200_000)
    estimate = estimate_tokens(messages, params)
    await limiter.acquire(estimate)
    ...call...
    limiter.settle(estimate, usage.prompt_tokens + usage.completion_tokens)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from pipelines.llm.types import Message, SamplingParams


def estimate_tokens(messages: list[Message], params: SamplingParams) -> int:
    """Upper-bound guess of the tokens a call will use: prompt estimate + ``max_tokens * n``.

    ASCII text runs ~4 characters per token, CJK ~1 character per token; each message adds a
    few tokens of chat-template framing.
    """
    prompt = 0
    for message in messages:
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = str(content)
        ascii_chars = sum(1 for ch in content if ch < "\x80") if not content.isascii() else len(content)
        prompt += ascii_chars // 4 + (len(content) - ascii_chars) + 4
    return prompt + params.max_tokens * params.n


class RateSchedule:
    """One limit: at most ``per_minute`` units per 60 s, spread evenly (no bursts)."""

    def __init__(self, per_minute: float, *, clock: Callable[[], float] = time.monotonic):
        if per_minute <= 0:
            raise ValueError(f"per_minute must be > 0, got {per_minute}")
        self.rate_per_s = per_minute / 60.0
        self._clock = clock
        self.next_free = 0.0  # the "theoretical arrival time" of GCRA: the earliest start of the next unit

    def reserve(self, cost: float, *, start: float | None = None) -> float:
        """Reserve ``cost`` units starting at ``start`` (default: the earliest free time); returns
        how many seconds from now the caller must wait. ``start`` must not be before ``next_free``."""
        now = self._clock()
        start = max(now, self.next_free) if start is None else max(start, now, self.next_free)
        self.next_free = start + cost / self.rate_per_s
        return start - now

    def refund(self, units: float) -> None:
        """Give back ``units`` (negative: charge more) after the true cost is known."""
        self.next_free -= units / self.rate_per_s
        # never bank unused capacity further back than "now": that would allow a later burst
        self.next_free = max(self.next_free, self._clock())


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits together; either may be None (no limit)."""

    def __init__(
        self,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.requests = RateSchedule(requests_per_minute, clock=clock) if requests_per_minute else None
        self.tokens = RateSchedule(tokens_per_minute, clock=clock) if tokens_per_minute else None
        self._clock = clock
        self._sleep = sleep

    @property
    def active(self) -> bool:
        return self.requests is not None or self.tokens is not None

    async def acquire(self, token_estimate: int) -> None:
        """Wait until one more request of about ``token_estimate`` tokens may start.

        The start is the later of both schedules' next free times, and BOTH are advanced from that
        one start: a request held back by the token limit is recorded in the request schedule at the
        time it really goes out, so neither limit is exceeded when the other one binds.
        """
        schedules = [(self.requests, 1), (self.tokens, token_estimate)]
        schedules = [(schedule, cost) for schedule, cost in schedules if schedule is not None]
        if not schedules:
            return
        start = max([self._clock()] + [schedule.next_free for schedule, _ in schedules])
        wait = max(schedule.reserve(cost, start=start) for schedule, cost in schedules)
        if wait > 0:
            await self._sleep(wait)

    def settle(self, token_estimate: int, tokens_used: int | None) -> None:
        """Correct the token schedule once the server reported the real usage of a call.

        ``tokens_used=None`` (the server reported no usage) keeps the estimate charged: refunding it
        would switch the tokens-per-minute limit off for such servers.
        """
        if self.tokens is not None and tokens_used is not None and tokens_used >= 0:
            self.tokens.refund(token_estimate - tokens_used)


class AdaptiveLimit:
    """Requests in flight to one backend, cut when a server stops answering in time.

    No limit until a reply times out; then the limit becomes half the requests that were in flight
    (at least 1), and grows by one per ``limit`` replies in time (additive increase, multiplicative
    decrease). A timed-out request that went out before the last cut cuts nothing more: one flood
    of requests queued in an overloaded server halves the limit once, not once per request. Time
    spent waiting here is not part of a request's ``timeout_s``, so resends wait for a free slot
    instead of queueing in the server again. ``bind()`` under each new event loop.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.limit: float | None = None
        self.in_use = 0
        self.last_cut = float("-inf")
        self.now = clock
        self._cond: asyncio.Condition | None = None

    def bind(self) -> None:
        self._cond = asyncio.Condition()
        self.in_use = 0

    async def acquire(self) -> float:
        """Wait for a slot; returns the start time to give :meth:`release`."""
        if self._cond is None:
            self.bind()
        async with self._cond:
            await self._cond.wait_for(lambda: self.limit is None or self.in_use < self.limit)
            self.in_use += 1
        return self.now()

    async def release(self, started: float, *, timed_out: bool = False) -> bool:
        """Free a slot; True when this timeout cut the limit (one that went out after the last cut)."""
        cut = False
        async with self._cond:
            if timed_out and started > self.last_cut:
                self.limit = max(1.0, self.in_use / 2)
                self.last_cut, cut = self.now(), True
            elif not timed_out and self.limit is not None:
                self.limit += 1 / self.limit
            self.in_use -= 1
            self._cond.notify_all()
        return cut
