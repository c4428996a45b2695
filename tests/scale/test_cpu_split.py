"""The paper-scale benchmark's CPU split (benchmarks/scale/cpu_split.py): each thread's CPU goes to
the component of the innermost wrapped call it was spent in (exclusive time), a coroutine's steps
are its own and not the other tasks', and the per-call figures add up to the process's CPU."""

from __future__ import annotations

import asyncio
import time

import pytest

from benchmarks.scale import cpu_split
from benchmarks.scale.runs import split_per_call


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.fixture
def ledger(monkeypatch):
    book = cpu_split.Ledger()
    monkeypatch.setattr(cpu_split, "LEDGER", book)
    return book


def test_nested_calls_count_for_the_innermost_component(ledger):
    store = cpu_split.timed(lambda: burn(0.02), "store")

    def team():
        burn(0.03)
        store()

    cpu_split.timed(team, "team")()
    totals = ledger.main.totals
    assert 0.02 <= totals["store"] < 0.03 and 0.03 <= totals["team"] < 0.045
    absorbed = cpu_split.whole_process(lambda: store())  # the baselines keep what they call
    absorbed()
    assert 0.02 <= totals["baselines"] < 0.03 and totals["store"] < 0.03


def test_a_phase_boundary_credits_open_calls_once(ledger):
    ledger.enter("runtime")
    ledger.enter("store")
    burn(0.01)
    ledger.flush()
    assert 0.01 <= ledger.main.totals["store"] < 0.015 and ledger.main.totals["runtime"] < 0.002
    burn(0.01)
    ledger.leave()
    burn(0.01)
    ledger.leave()
    assert 0.02 <= ledger.main.totals["store"] < 0.025 and 0.01 <= ledger.main.totals["runtime"] < 0.015


def test_a_coroutine_is_charged_its_own_steps_only(ledger):
    async def client():
        burn(0.01)
        await asyncio.sleep(0.02)
        burn(0.01)

    async def other():
        await asyncio.sleep(0.005)
        burn(0.03)  # runs while the client waits: not the client's

    async def both():
        await asyncio.gather(cpu_split.timed_async(client, "runtime")(), other())

    asyncio.run(both())
    assert 0.02 <= ledger.main.totals["runtime"] < 0.03


def test_the_per_call_figures_add_up_to_the_process_cpu():
    split = {
        "process_cpu_s": 20.0,
        "startup": {"cpu_s": 8.0, "components": {"embedding": 1.0, "store": 0.0, "runtime": 0.0, "team": 2.0,
                                                 "baselines": 5.0}},
        "calls": {"cpu_s": 12.0, "components": {"embedding": 4.0, "store": 1.0, "runtime": 3.0, "team": 2.0,
                                               "baselines": 0.0}},
        "children_cpu_s": 0.25,
        "other_threads": {"OMP": 1.5},
        "other_threads_exited": 0.5,
    }  # fmt: skip
    row = split_per_call(split, 21.0, 1000)  # 1 s after the stage returned: its children and its exit
    assert row["startup"] == 3.0 and row["embedding"] == 4.0 and row["other_threads"] == 2.0
    assert row["children"] == 0.25 and row["exit"] == 0.75
    parts = ("startup", "embedding", "store", "runtime", "team", "other_threads", "children", "exit")
    assert sum(row[k] for k in parts) == pytest.approx(row["total"]) and row["total"] == 16.0
    assert row["baselines_s"] == 5.0 and row["total_with_baselines"] == 21.0 and row["startup_embedding_s"] == 1.0
