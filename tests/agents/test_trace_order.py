"""traces.jsonl is the same file for identical runs whatever order concurrent steps finish in
(issue 36, item 11): rows follow program order, not completion order."""

import asyncio
import random

from pipelines.agents import SampleTrace
from pipelines.agents.harness import System, run_systems
from pipelines.agents.outputs import GenerationOutputs
from pipelines.agents.trace_order import order_key, ordered_tasks
from pipelines.llm.accounting import Accounting


def _run(tmp_path, seed: int) -> bytes:
    rng = random.Random(seed)
    delays = {(i, step): rng.random() / 200 for i in range(12) for step in range(6)}

    async def step(item, trace: SampleTrace, name: int) -> None:
        await asyncio.sleep(delays[(item, name)])  # a different completion order in every run
        trace.add_row({"agent": f"step{name}", "prompt": None, "ok": True})
        if name % 2:  # a nested pair of concurrent calls
            await asyncio.gather(step_leaf(item, trace, name, 0), step_leaf(item, trace, name, 1))

    async def step_leaf(item, trace, name, leaf) -> None:
        await asyncio.sleep(delays[(item, (name + leaf) % 6)])
        trace.add_row({"agent": f"step{name}.{leaf}", "prompt": None, "ok": True})

    async def worker(item, trace: SampleTrace):
        trace.add_row({"agent": "plan", "prompt": None, "ok": True})
        await asyncio.gather(*(step(item, trace, n) for n in range(6)))
        trace.add_row({"agent": "vote", "prompt": None, "ok": True})
        return item

    folder = tmp_path / f"run{seed}"
    outputs = GenerationOutputs(generated_dir=str(folder / "gen"), reports_dir=str(folder / "rep"))
    asyncio.run(run_systems(list(range(12)), [System("team", worker), System("other", worker)],
                            accounting=Accounting(), outputs=outputs, sample_id=str,
                            prediction_row=lambda i, p: {"id": i, **p}, concurrency=8, progress=False))
    return (folder / "gen" / "traces.jsonl").read_bytes()


def test_two_runs_with_different_completion_orders_write_identical_traces(tmp_path):
    first, second = _run(tmp_path, 1), _run(tmp_path, 2)
    assert first == second
    agents = [line.split(b'"agent": "')[1].split(b'"')[0].decode() for line in first.splitlines()[:17]]
    assert agents == ["plan", "step0", "step1", "step1.0", "step1.1", "step2", "step3", "step3.0", "step3.1",
                      "step4", "step5", "step5.0", "step5.1", "vote", "plan", "step0", "step1"]  # program order


def test_keys_follow_task_creation_and_the_factory_is_removed_after():
    async def main():
        loop = asyncio.get_running_loop()
        with ordered_tasks():
            async def child():
                await asyncio.sleep(0)
                return order_key()
            first = order_key()
            keys = await asyncio.gather(child(), child())
            last = order_key()
            assert loop.get_task_factory() is not None
        assert loop.get_task_factory() is None
        return first, keys, last

    first, keys, last = asyncio.run(main())
    assert first == (0,) and keys == [(1, 0), (2, 0)] and last == (3,)
    assert order_key() == ()  # outside: no order, rows keep their append order
