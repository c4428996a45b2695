"""The generation harness: several systems over the same samples under one limit, usage per system,
outputs streamed in input order, flat memory, the failure budget, an empty run refused."""

import asyncio
import json
import tracemalloc

import pytest

from pipelines.agents import Agent, SampleTrace
from pipelines.agents.harness import (
    EmptyEvaluation,
    FailureBudgetExceeded,
    GenerationOutputs,
    System,
    run_systems,
)
from pipelines.llm.accounting import Accounting
from pipelines.llm.client import LLM
from pipelines.llm.config import LLMConfig
from pipelines.llm.types import ChatResult, Choice, LLMError, Usage
from tests.agents.test_agent import FIXTURES, parse_yes_no


class Backend:
    """Answers ``<Yes>`` for even items, ``<No>`` for odd ones, garbage for multiples of 5, fails on ``fail``."""

    identity = "harness-test"

    def __init__(self, delay_s=0.002):
        self.delay_s, self.in_flight, self.peak = delay_s, 0, 0

    async def chat(self, messages, params):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        text = messages[-1]["content"]
        if "fail" in text:
            raise LLMError("server http://down:1 unreachable")
        number = int(text.split()[1].split("-")[0])
        reply = "hmm" if number % 5 == 0 else ("<Yes>" if number % 2 == 0 else "<No>")
        return ChatResult([Choice(reply)], Usage(10, 1))

    async def close(self):
        raise AssertionError("the harness must not close the backend")


def systems_over(backend, accounting):
    agent = Agent("echo", FIXTURES, parse_yes_no, max_attempts=1)
    judge = LLM(backend, role="judge", accounting=accounting)
    voter = LLM(backend, role="voter", accounting=accounting)

    async def single(item, trace: SampleTrace):
        record = await agent.run(judge, {"item": f"{item}", "extras": []})
        trace.add(record)
        return record.parsed

    async def pair(item, trace: SampleTrace):
        records = await asyncio.gather(*(agent.run(voter, {"item": f"{item}-{j}", "extras": []}) for j in range(2)))
        for record in records:
            trace.add(record)
        votes = [r.parsed for r in records if r.ok]
        trace.add_result("pair", "aggregate", result={"votes": votes}, inputs={"n": 2}, latency_s=0.5)
        return all(votes) if votes else None

    return [
        System("single", single, prediction=lambda r: int(bool(r)), failed_subtasks=lambda r: int(r is None)),
        System("pair", pair, prediction=lambda r: int(bool(r))),
    ]


def run(items, tmp_path, *, backend=None, max_failed_share=0.2, concurrency=3, max_unparseable_share=1.0):
    backend = backend or Backend()
    accounting = Accounting()
    outputs = GenerationOutputs(generated_dir=str(tmp_path / "gen"), reports_dir=str(tmp_path / "rep"))
    report = asyncio.run(
        run_systems(
            items,
            systems_over(backend, accounting),
            accounting=accounting,
            outputs=outputs,
            sample_id=lambda i: f"s{i}",
            prediction_row=lambda i, preds: {"id": f"s{i}", "predictions": preds},
            exports={"rows.jsonl": lambda i, results: [{"id": f"s{i}"}] if results["pair"] else []},
            fixed_predictions={"baseline": [1] * len(items)},
            concurrency=concurrency,
            max_failed_share=max_failed_share,
            max_unparseable_share=max_unparseable_share,
            progress=False,
        )
    )
    return report, backend


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_systems_share_one_limit_and_stream_outputs_in_input_order(tmp_path):
    items = list(range(1, 41))
    report, backend = run(items, tmp_path)
    assert backend.peak == 3 and report.peak_concurrency == 3  # one limit over both systems
    predictions = read(tmp_path / "gen/predictions.jsonl")
    assert [p["id"] for p in predictions] == [f"s{i}" for i in items]
    assert predictions[1] == {"id": "s2", "predictions": {"baseline": 1, "single": 1, "pair": 1}}
    assert predictions[0]["predictions"]["single"] == 0 and predictions[4]["predictions"]["single"] == 0
    assert report.systems["single"].predictions == [int(i % 2 == 0 and i % 5 != 0) for i in items]
    # usage per system, without a role table
    assert report.systems["single"].usage["judge"]["calls"] == 40 and "voter" not in report.systems["single"].usage
    assert report.systems["pair"].usage["total"]["calls"] == 80
    usage = json.loads((tmp_path / "rep/usage.json").read_text())
    assert usage["total"]["calls"] == 120 and usage["systems"]["pair"]["voter"]["prompt_tokens"] == 800
    # unparseable replies per agent; failed sub-tasks from the system's own count
    assert report.systems["single"].unparseable() == {"echo": {"replies": 40, "unparseable": 8}}
    assert report.systems["single"].failed_subtasks == 8 and report.failed_samples == 0
    traces = read(tmp_path / "gen/traces.jsonl")
    assert len(traces) == 40 * 4 and traces[0]["sample_id"] == "s1"
    assert [t["system"] for t in traces[:4]] == ["single", "pair", "pair", "pair"]
    aggregate = [t for t in traces if t["agent"] == "pair"]
    assert aggregate[0]["inputs"] == {"n": 2} and aggregate[0]["latency_s"] == 0.5 and aggregate[0]["prompt"] is None
    exported = read(tmp_path / "gen/rows.jsonl")
    assert [r["id"] for r in exported] == [f"s{i}" for i in items if i % 2 == 0 and i % 5 != 0]
    assert report.written == {"predictions.jsonl": 40, "traces.jsonl": 160, "rows.jsonl": len(exported)}
    assert json.loads((tmp_path / "rep/failures.json").read_text())["failed_share"] == 0.0
    assert not list((tmp_path / "gen").glob(".*.tmp"))


def test_memory_stays_flat_on_many_samples(tmp_path):
    """3000 samples whose prompts total ~30 MB: the run holds only a window of them."""

    big = "x" * 10_000

    async def worker(item, trace: SampleTrace):
        trace.add_row({"agent": "big", "prompt": [{"role": "user", "content": big + str(item)}], "ok": True})
        await asyncio.sleep(0)
        return item

    outputs = GenerationOutputs(generated_dir=str(tmp_path / "gen"), reports_dir=str(tmp_path / "rep"))
    tracemalloc.start()
    report = asyncio.run(
        run_systems(
            list(range(3000)),
            [System("big", worker)],
            accounting=Accounting(),
            outputs=outputs,
            sample_id=str,
            prediction_row=lambda i, p: {"id": i, **p},
            concurrency=4,
            progress=False,
        )
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert report.samples == 3000 and report.written["traces.jsonl"] == 3000
    assert peak < 4_000_000, f"peak {peak} bytes: traces are being kept in memory"
    assert report.systems["big"].predictions[:3] == [0, 1, 2]
    assert (tmp_path / "gen/traces.jsonl").stat().st_size > 30_000_000


def test_failure_budget_writes_traces_and_summary_then_raises(tmp_path):
    items = [f"fail-{i}" for i in range(4)] + [2] * 6  # 4 of 10 samples hit a dead server (Backend raises LLMError)
    with pytest.raises(FailureBudgetExceeded, match=r"4 of 10 samples failed \(40% > max_failed_share 20%\)"):
        run(items, tmp_path)
    summary = json.loads((tmp_path / "rep/failures.json").read_text())
    assert summary["failed_samples"] == 4 and summary["systems"]["single"]["errors"] == {"llm": 4}
    assert "server http://down:1 unreachable" in summary["systems"]["single"]["most_common"]["llm"]
    traces = read(tmp_path / "gen/traces.jsonl")
    assert sum(t["error_kind"] == "llm" for t in traces if "error_kind" in t) == 4 * 3
    report, _ = run(items, tmp_path / "lenient", max_failed_share=0.5)
    assert report.failed_samples == 4


def test_a_worker_exception_fails_its_system_only(tmp_path):
    async def boom(item, trace):
        raise RuntimeError(f"bad {item}")

    async def fine(item, trace):
        return 1

    outputs = GenerationOutputs(generated_dir=str(tmp_path / "gen"), reports_dir=str(tmp_path / "rep"))
    report = asyncio.run(
        run_systems(
            [1, 2, 3, 4, 5],
            [System("fine", fine), System("boom", boom, prediction=lambda r: -1 if r is None else r)],
            accounting=Accounting(),
            outputs=outputs,
            sample_id=str,
            prediction_row=lambda i, p: p,
            max_failed_share=1.0,
            progress=False,
        )
    )
    assert report.systems["fine"].predictions == [1] * 5 and report.systems["boom"].predictions == [-1] * 5
    assert report.systems["boom"].errors == {"RuntimeError": 5} and report.failed_samples == 5


def test_empty_run_is_an_error(tmp_path):
    with pytest.raises(EmptyEvaluation, match="no samples"):
        run([], tmp_path)


def test_unknown_role_lists_the_valid_ones():
    default = {"kind": "scripted", "replies": "unused.jsonl"}
    typo = LLMConfig(default=default, roles={"planner": {"sampling": {}}, "numerical_judg": {"sampling": {}}})
    with pytest.raises(ValueError, match="unknown role 'numerical_judg' in llm.roles; valid roles: planner, solver"):
        typo.check_roles(("planner", "solver"))
    LLMConfig(default=default, roles={"solver": {"sampling": {}}}).check_roles(("planner", "solver"))


def test_a_run_whose_replies_mostly_do_not_parse_fails_after_writing_its_outputs(tmp_path):
    """Issue 36.10: a server that ignores the schema gives replies none of which parse; the run said
    nothing failed (exit 0, coverage 0.00). Multiples of 5 get "hmm" (unparseable) from Backend."""
    from pipelines.agents.harness import UnparseableBudgetExceeded

    with pytest.raises(UnparseableBudgetExceeded, match=r"9 of 12 replies unparseable \(75% > max_unparseable_sh"):
        run([5, 10, 15, 2], tmp_path, max_unparseable_share=0.5)  # single: 3 of 4, pair: 6 of 8 ("5-0" is 5)
    assert len(read(tmp_path / "gen/predictions.jsonl")) == 4  # the outputs are written first
    report, _ = run([5, 2, 4, 6], tmp_path / "fine", max_unparseable_share=0.5)  # 3 of 12: within the budget
    assert report.samples == 4
    report, _ = run([5, 10, 15, 2], tmp_path / "unchecked")  # the harness's default checks nothing
    assert report.samples == 4


def test_a_failed_run_leaves_no_output_of_an_earlier_run(tmp_path):
    run([2, 4], tmp_path)
    assert (tmp_path / "gen/traces.jsonl").exists() and (tmp_path / "rep/failures.json").exists()

    class Crash(Backend):
        async def chat(self, messages, params):
            raise asyncio.CancelledError  # a stage stopped mid-run (SIGTERM cancels), not a sample's failure

    with pytest.raises(asyncio.CancelledError):
        run([2, 4], tmp_path, backend=Crash())
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert left == []  # before: the earlier run's predictions, traces, rows, usage.json and failures.json
