"""The runner: one concurrency limit over every call, failures counted not raised, traces written."""

import asyncio
import json

import pytest

from pipelines.agents import Agent, CallLimiter, Runner, call_slot
from pipelines.llm.client import LLM
from pipelines.llm.types import ChatResult, Choice, Usage
from tests.agents.test_agent import FIXTURES, parse_yes_no


class CountingBackend:
    """Sleeps ``delay_s`` per call and records the largest number of calls in flight."""

    identity = "counting"

    def __init__(self, delay_s=0.01):
        self.delay_s = delay_s
        self.in_flight = 0
        self.peak = 0
        self.calls = 0

    async def chat(self, messages, params):
        self.in_flight += 1
        self.calls += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        return ChatResult([Choice("<Yes>")], Usage(1, 1))

    async def close(self):
        return None


def test_limit_holds_across_samples_and_their_parallel_agents(tmp_path):
    backend = CountingBackend()
    llm = LLM(backend)
    agent = Agent("echo", FIXTURES, parse_yes_no)

    async def worker(item, trace):
        records = await asyncio.gather(*(agent.run(llm, {"item": f"{item}-{j}", "extras": []}) for j in range(3)))
        for record in records:
            trace.add(record)
        if item % 7 == 3:
            raise RuntimeError(f"bad sample {item}")
        return all(r.parsed for r in records)

    report = asyncio.run(Runner(5, progress=False).run(range(30), worker, sample_id=lambda i: f"s{i}"))
    assert backend.calls == 90
    assert backend.peak == 5 and report.peak_concurrency == 5
    assert report.failures == 4  # items 3, 10, 17, 24
    failed = [o for o in report.outcomes if not o.ok]
    assert [o.sample_id for o in failed] == ["s3", "s10", "s17", "s24"]
    assert failed[0].error == "RuntimeError: bad sample 3" and failed[0].result is None
    assert [o.index for o in report.outcomes] == list(range(30))
    assert report.results[0] is True

    path = tmp_path / "out" / "traces.jsonl"
    assert report.write_traces(path) == 90
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert {r["sample_id"] for r in rows} == {f"s{i}" for i in range(30)}
    assert all(r["agent"] == "echo" and r["ok"] for r in rows)
    assert not list(path.parent.glob(".*.tmp"))


def test_older_samples_are_served_first():
    order = []

    async def main():
        limiter = CallLimiter(1)
        await limiter.acquire()

        async def waiter(priority):
            await limiter.acquire(priority)
            order.append(priority)
            limiter.release()

        tasks = [asyncio.create_task(waiter(p)) for p in (5, 1, 3)]
        await asyncio.sleep(0)
        limiter.release()
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert order == [1, 3, 5]


def test_runner_serves_waiting_calls_in_arrival_order_across_samples():
    # limit 1: s0's first call holds the slot while s1 and s2 queue; s0's second call arrives after
    # them and waits its turn (with the sample ordinal as priority it would jump ahead of s2)
    order = []

    async def worker(item, trace):
        calls = 2 if item == 0 else 1
        for _ in range(calls):
            async with call_slot():
                order.append(item)
                await asyncio.sleep(0.01)
        return item

    report = asyncio.run(Runner(1, progress=False).run(range(3), worker))
    assert report.results == [0, 1, 2]
    assert order == [0, 1, 2, 0]


def test_call_slot_is_free_outside_a_run_and_limit_must_be_positive():
    async def main():
        async with call_slot():
            return True

    assert asyncio.run(main())
    with pytest.raises(ValueError):
        CallLimiter(0)


def test_admission_window_bounds_samples_in_flight():
    started, active, peak = [], [0], [0]

    async def worker(item, trace):
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        started.append(item)
        await asyncio.sleep(0.001)
        active[0] -= 1
        return item

    report = asyncio.run(Runner(2, max_pending=4, progress=False).run(range(20), worker))
    assert report.results == list(range(20)) and peak[0] <= 4


def test_the_progress_bar_counts_llm_calls_while_a_sample_runs(capsys):
    """A sample of many dependent calls (the tagging bar sat at 0/14 for minutes) moves the bar's postfix."""
    seen_while_running: list[str] = []

    async def worker(item, trace):
        for _ in range(5):
            async with call_slot():
                await asyncio.sleep(0.01)
        seen_while_running.append(capsys.readouterr().err)
        return item

    runner = Runner(2, desc="calls", progress=True)
    runner.progress_every_s = 0.0
    asyncio.run(runner.run([1], worker))
    err = seen_while_running[0]
    assert "0/1" in err and "llm_calls=4" in err  # before the sample finished: its calls so far
    assert "llm_calls=5" in capsys.readouterr().err
