"""``mode: batch`` of the OpenAI-compatible backend against the simulated server's batch API: the same
replies as online, waves, size limits, expired and failed lines retried (counted), the journal
that lets a run killed while waiting re-attach, and the strict config."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipelines.agents.runner import Runner
from pipelines.llm.batch_protocol import input_line, parse_line, split
from pipelines.llm.client import LLM, LLMRuntime
from pipelines.llm.config import LLMConfig, OpenAIBackendConfig
from pipelines.llm.openai_backend import OpenAIBackend
from pipelines.llm.types import ChatResult, Choice, LLMError, SamplingParams
from tests.support.simserver import BatchAPI, BatchFaults, EngineModel, SimServer

PARAMS = SamplingParams(max_tokens=30)
QUESTIONS = [[{"role": "user", "content": f"question {i} about the island"}] for i in range(20)]


def spec(url: str, journal: Path | None = None, **batch) -> OpenAIBackendConfig:
    options = {"poll_interval_s": 0.02, "settle_s": 0.01, **batch}
    if journal is not None:
        options["journal"] = str(journal)
    return OpenAIBackendConfig(
        kind="openai", model="qwen", base_urls=[url], api_key_env=None, mode="batch", batch=options, max_retries=1
    )


def online_spec(url: str) -> OpenAIBackendConfig:
    return OpenAIBackendConfig(kind="openai", model="qwen", base_urls=[url], api_key_env=None)


async def _serve(body, faults: BatchFaults | None = None, log: Path | None = None):
    server = SimServer(EngineModel(compression=500), served_model_names=("qwen",), log_path=log)
    BatchAPI(server, faults or BatchFaults(delay_s=0.05))
    async with server:
        return await body(server)


async def _ask(backend: OpenAIBackend, questions=QUESTIONS) -> list[str]:
    try:
        results = await asyncio.gather(*(backend.chat(m, PARAMS, key=f"k{i}") for i, m in enumerate(questions)))
        return [r.text for r in results]
    finally:
        await backend.close()


def test_one_wave_gives_the_online_replies_and_splits_at_the_request_limit(tmp_path):
    async def body(server):
        online = OpenAIBackend(online_spec(server.url))
        expected = await _ask(online)
        backend = OpenAIBackend(spec(server.url, tmp_path / "j.sqlite", max_requests=7))
        got = await _ask(backend)
        return expected, got, dict(backend.batch.stats), dict(server.counts)

    expected, got, stats, counts = asyncio.run(_serve(body))
    assert got == expected and len(set(got)) == 20
    assert stats["waves"] == 1 and stats["batches"] == 3 and stats["submitted"] == 20  # 7 + 7 + 6
    assert counts["batches"] == 3 and counts["batch_items"] == 20 and counts["answered"] == 20  # the online run only


def test_expired_and_failed_lines_go_into_the_next_batch_and_are_counted(tmp_path):
    faults = BatchFaults(delay_s=0.05, expire_rate=0.25, error_rate=0.15, seed=4)

    async def body(server):
        backend = OpenAIBackend(spec(server.url, tmp_path / "j.sqlite"))
        try:
            results = await asyncio.gather(*(backend.chat(m, PARAMS, key=f"k{i}") for i, m in enumerate(QUESTIONS)))
        finally:
            await backend.close()
        return results, dict(backend.batch.stats), dict(server.counts)

    results, stats, counts = asyncio.run(_serve(body, faults))
    got = [r.text for r in results]
    assert all(got) and len(got) == 20
    retried = [r.retried_errors for r in results if r.retried_errors]  # kept for the agents' trace rows
    assert len(retried) == counts["batch_expired"] + counts["batch_errors"]
    assert all(len(e) == 1 and e[0].startswith("batch batch-sim-0: ") for e in retried)
    assert {e[0].split(": ", 1)[1].split(":")[0] for e in retried} == {"batch_expired", "HTTP 500"}
    faulty = counts["batch_expired"] + counts["batch_errors"]
    assert counts["batch_expired"] > 0 and counts["batch_errors"] > 0
    assert (
        stats["item_errors"] == faulty
        and stats["retried_batch"] == faulty
        and stats["expired"] == counts["batch_expired"]
    )
    assert stats["batches"] == 2 and counts["batch_items"] == 20 + faulty  # the retry batch has no faults


def test_failed_lines_online_or_failing_with_their_error(tmp_path):
    faults = BatchFaults(delay_s=0.05, error_rate=0.3, faulty_batches=5, seed=1)

    async def body(server):
        online = OpenAIBackend(spec(server.url, None, on_item_failure="online"))
        replies = await _ask(online)
        answered_online = server.counts["answered"]
        failing = OpenAIBackend(spec(server.url, None, on_item_failure="fail"))
        try:
            outcomes = await asyncio.gather(
                *(failing.chat(m, PARAMS, key=f"f{i}") for i, m in enumerate(QUESTIONS)), return_exceptions=True
            )
        finally:
            await failing.close()
        return replies, answered_online, dict(online.batch.stats), outcomes, dict(failing.batch.stats)

    replies, answered_online, online_stats, outcomes, failing_stats = asyncio.run(_serve(body, faults))
    assert all(replies) and answered_online == online_stats["retried_online"] > 0
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert len(errors) == failing_stats["failed_items"] == failing_stats["item_errors"] > 0
    assert all(isinstance(e, LLMError) and "HTTP 500: server error (simulated)" in str(e) for e in errors)
    assert "batch batch-sim-" in str(errors[0])


def test_a_run_stopped_while_waiting_reattaches_instead_of_submitting_again(tmp_path):
    journal, log = tmp_path / "j.sqlite", tmp_path / "requests.jsonl"

    async def body(server):
        first = OpenAIBackend(spec(server.url, journal))
        task = asyncio.ensure_future(_ask(first))
        while server.counts["batches"] == 0:  # submitted and recorded: stop the run while it waits
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        second = OpenAIBackend(spec(server.url, journal))
        replies = await _ask(second)
        online = await _ask(OpenAIBackend(online_spec(server.url)))
        return replies, online, dict(second.batch.stats), dict(server.counts)

    replies, online, stats, counts = asyncio.run(_serve(body, BatchFaults(delay_s=0.6), log))
    assert replies == online
    assert stats["reattached"] == 1 and stats.get("submitted", 0) == 0 and counts["batches"] == 1
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    submitted = [r["custom_id"] for r in rows if r.get("kind") == "batch_item"]
    assert len(submitted) == 20 and len(set(submitted)) == 20  # no line was submitted twice


def test_results_nobody_waited_for_stay_in_the_journal_for_a_later_call(tmp_path):
    journal = tmp_path / "j.sqlite"

    async def body(server):
        first = OpenAIBackend(spec(server.url, journal))
        task = asyncio.ensure_future(_ask(first))
        while server.counts["batches"] == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        second = OpenAIBackend(spec(server.url, journal))
        head = await _ask(second, QUESTIONS[:5])  # the batch of 20 ends; 15 results are kept
        third = OpenAIBackend(spec(server.url, journal))
        rest = await _ask(third, QUESTIONS)
        return head, rest, dict(third.batch.stats), dict(server.counts)

    head, rest, stats, counts = asyncio.run(_serve(body, BatchFaults(delay_s=0.3)))
    assert rest[:5] == head and all(rest)
    assert stats["from_journal"] == 15 and stats["submitted"] == 5  # the 5 taken by the second run went to its cache
    assert counts["batch_items"] == 25


def test_waves_follow_the_steps_of_the_samples_through_the_runtime(tmp_path):
    """Ten samples of two dependent steps each: two waves, whatever the order the calls come in;
    the second run finds every call in the cache and submits nothing."""

    async def body(server):
        config = LLMConfig(default=spec(server.url).model_dump(), cache=str(tmp_path / "llm.sqlite"))
        stats = []
        for _ in range(2):
            runtime = LLMRuntime(config)
            llm = runtime.for_role("solver", PARAMS)

            async def worker(i, trace, llm=llm):
                first = await llm.chat([{"role": "user", "content": f"plan {i}"}], sample_index=i)
                await asyncio.sleep(0.001 * i)  # samples take different times between their steps
                second = await llm.chat([{"role": "user", "content": f"solve {i}: {first.text[:40]}"}], sample_index=i)
                return second.text

            report = await Runner(64, progress=False).run(range(10), worker)
            stats.append(dict(runtime.backend_for("solver").batch.stats))
            await runtime.close()
            assert all(report.results) and report.failures == 0
        return stats

    first, second = asyncio.run(_serve(body))
    assert first["waves"] == 2 and first["submitted"] == 20
    assert second == {}  # every call was a cache hit
    assert (tmp_path / "llm.batches.sqlite").exists()  # the journal lies beside the cache


class _SlowBackend:
    """An online step that takes longer than the collector's settle time."""

    identity = "slow"

    async def chat(self, messages, params):
        await asyncio.sleep(0.15)
        return ChatResult([Choice("looked it up")])

    async def close(self):
        pass


async def _ten_samples(runtime, worker):
    """Ten samples through a runner at 64 in flight; the report and the solver backend's batch stats."""
    report = await Runner(64, progress=False).run(range(10), worker)
    stats = dict(runtime.backend_for("solver").batch.stats)
    await runtime.close()
    return report, stats


def test_a_wave_waits_for_calls_still_in_progress(tmp_path):
    """Half the samples first make a slow online call (0.15 s, 15 settle ticks): the wave is not
    complete while those are in progress, so all ten batch calls still go in one wave."""

    async def body(server):
        runtime = LLMRuntime(LLMConfig(default=spec(server.url).model_dump(), cache=None))
        llm, slow = runtime.for_role("solver", PARAMS), LLM(_SlowBackend(), role="lookup")

        async def worker(i, trace):
            note = (await slow.chat([{"role": "user", "content": f"look up {i}"}])).text if i % 2 else ""
            return (await llm.chat([{"role": "user", "content": f"solve {i} {note}"}], sample_index=i)).text

        return await _ten_samples(runtime, worker)

    report, stats = asyncio.run(_serve(body))
    assert all(report.results) and stats["waves"] == 1 and stats["submitted"] == 10


def test_a_wave_waits_for_samples_busy_outside_the_llm(tmp_path):
    """Half the samples work 0.15 s (a retrieval, a sandbox run) before their call: the runner's
    samples are not all waiting, so the wave waits for them."""

    async def body(server):
        runtime = LLMRuntime(LLMConfig(default=spec(server.url).model_dump(), cache=None))
        llm = runtime.for_role("solver", PARAMS)

        async def worker(i, trace):
            if i % 2:
                await asyncio.sleep(0.15)
            return (await llm.chat([{"role": "user", "content": f"solve {i}"}], sample_index=i)).text

        return await _ten_samples(runtime, worker)

    report, stats = asyncio.run(_serve(body))
    assert all(report.results) and stats["waves"] == 1 and stats["submitted"] == 10


def test_the_runs_call_limit_bounds_a_wave():
    """At concurrency 4 a wave holds the 4 calls that have a slot; the others wait for the next."""

    async def body(server):
        runtime = LLMRuntime(LLMConfig(default=spec(server.url).model_dump(), cache=None))
        llm = runtime.for_role("solver", PARAMS)

        async def worker(i, trace):
            return (await llm.chat([{"role": "user", "content": f"solve {i}"}], sample_index=i)).text

        report = await Runner(4, progress=False).run(range(10), worker)
        stats = dict(runtime.backend_for("solver").batch.stats)
        await runtime.close()
        return report, stats, dict(server.counts)

    report, stats, counts = asyncio.run(_serve(body))
    assert all(report.results) and stats["waves"] == 3 and counts["batch_items"] == 10  # 4 + 4 + 2


def test_protocol_lines_limits_and_outcomes():
    line = input_line("abc", "/v1/chat/completions", b'{"model":"m","messages":[]}')
    assert json.loads(line) == {
        "custom_id": "abc",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": []},
    }
    lines = [b"x" * 40 + b"\n"] * 5
    assert split(lines, max_requests=10, max_bytes=100) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="max_file_bytes"):
        split(lines, max_requests=10, max_bytes=20)
    late = {"code": "batch_expired", "message": "late"}
    expired = parse_line({"custom_id": "a", "response": None, "error": late}, "m")
    assert expired.retryable and expired.error == "batch_expired: late"
    bad = {"status_code": 400, "body": {"error": {"message": "bad"}}}
    refused = parse_line({"custom_id": "b", "response": bad}, "m")
    assert not refused.retryable and refused.error == "HTTP 400: bad"
    reply = {"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {}}
    ok = parse_line({"custom_id": "c", "response": {"status_code": 200, "body": reply}, "error": None}, "m")
    assert ok.result.text == "hi" and ok.error is None


def test_batch_settings_are_strict():
    with pytest.raises(ValidationError, match="pol_interval_s"):
        OpenAIBackendConfig(
            kind="openai", model="m", base_urls=["http://h/v1"], mode="batch", batch={"pol_interval_s": 5}
        )
    with pytest.raises(ValidationError, match="on_item_failure"):
        OpenAIBackendConfig(kind="openai", model="m", base_urls=["http://h/v1"], batch={"on_item_failure": "drop"})
