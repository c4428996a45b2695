"""The client-side rate limiter on a virtual clock: both limits hold together, usage settles the tokens."""

from __future__ import annotations

import asyncio
import heapq
import itertools

import pytest

from pipelines.llm.ratelimit import RateLimiter, RateSchedule


class VirtualTime:
    """A clock and a ``sleep`` that advance only when every task is waiting (no real time passes)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, asyncio.Future]] = []
        self._ids = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + max(0.0, delay), next(self._ids), future))
        await future

    async def run_until(self, end: float) -> None:
        while self.now < end:
            for _ in range(50):  # let every runnable task reach its next sleep
                await asyncio.sleep(0)
            if not self._timers:
                return
            when, _, future = heapq.heappop(self._timers)
            self.now = max(self.now, when)
            future.set_result(None)


def most_in_window(times: list[float], window: float, *, last_start: float) -> int:
    times = sorted(times)
    return max(sum(1 for t in times if start <= t < start + window) for start in times if start <= last_start)


def simulate(rpm: int, tpm: int, *, workers: int, estimate: int, used: int | None, seconds: float):
    """``workers`` callers in a loop: acquire, a 0.5 s call, settle with ``used`` tokens."""
    clock = VirtualTime()
    limiter = RateLimiter(rpm, tpm, clock=clock.clock, sleep=clock.sleep)
    starts: list[float] = []

    async def worker() -> None:
        while True:
            await limiter.acquire(estimate)
            starts.append(clock.now)
            await clock.sleep(0.5)
            limiter.settle(estimate, used)

    async def main() -> None:
        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        await clock.run_until(seconds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    return starts


def test_rpm_holds_when_the_token_limit_binds():
    # 40 callers; estimates of 20 tokens at 600 tpm bind first, refunds then free tokens: before the fix
    # the request schedule lagged behind the real starts and 99 requests went out in one 60 s window
    starts = simulate(60, 600, workers=40, estimate=20, used=2, seconds=300)
    assert len(starts) > 200  # the run really was limited by both, not idle
    assert most_in_window(starts, 60.0, last_start=240.0) <= 60
    gaps = [b - a for a, b in itertools.pairwise(sorted(starts))]
    assert min(gaps) >= 1.0 - 1e-9  # never two requests closer than the rpm spacing


def test_tpm_stays_on_for_servers_without_usage():
    # no usage reported: the estimate stays charged, 600 tpm / 100 tokens = 6 requests per minute
    starts = simulate(1000, 600, workers=10, estimate=100, used=None, seconds=300)
    assert most_in_window(starts, 60.0, last_start=240.0) <= 6
    # usage reported (10 tokens): the refund frees the schedule and more requests go out
    assert len(simulate(1000, 600, workers=10, estimate=100, used=10, seconds=300)) > 3 * len(starts)


def test_both_schedules_advance_from_one_start():
    clock = [0.0]
    limiter = RateLimiter(60, 600, clock=lambda: clock[0], sleep=lambda s: asyncio.sleep(0))
    asyncio.run(limiter.acquire(100))  # tokens: next free at 10 s; requests: at 1 s
    asyncio.run(limiter.acquire(100))  # starts at 10 s (tokens bind)
    assert limiter.tokens.next_free == pytest.approx(20.0)
    assert limiter.requests.next_free == pytest.approx(11.0)  # recorded at its real start, 10 s


def test_schedule_reserve_and_refund():
    clock = [100.0]
    schedule = RateSchedule(6000, clock=lambda: clock[0])  # 100 tokens per second
    assert schedule.reserve(200) == 0.0
    assert schedule.reserve(100) == pytest.approx(2.0)
    schedule.refund(150)
    assert schedule.reserve(100, start=clock[0]) == pytest.approx(1.5)  # a start before next_free is moved up
    assert not RateLimiter().active
