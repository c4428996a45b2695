"""The chat interface, request cache and usage accounting, on the scripted backend."""

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipelines.llm.cache import RequestCache, request_key
from pipelines.llm.client import LLM, LLMRuntime
from pipelines.llm.config import LLMConfig
from pipelines.llm.scripted import ScriptedBackend
from pipelines.llm.types import LLMError, SamplingParams

ROOT = Path(__file__).resolve().parents[2]


def echo_backend(**kwargs):
    return ScriptedBackend([(r"user: (.*)", lambda m: "echo " + m[-1]["content"])], **kwargs)


def run(coro):
    return asyncio.run(coro)


def test_chat_returns_text_finish_reason_usage_and_n_choices():
    llm = LLM(echo_backend())
    result = run(llm.chat([{"role": "user", "content": "two words"}], SamplingParams(n=3)))
    assert result.text == "echo two words"
    assert result.finish_reason == "stop"
    assert len(result.choices) == 3
    assert result.usage.completion_tokens == 9


def test_cache_replays_and_key_separates_model_params_and_index(tmp_path):
    backend = echo_backend()
    cache = RequestCache(tmp_path / "c.sqlite")
    llm = LLM(backend, cache=cache, role="solver")
    msgs = [{"role": "user", "content": "hello"}]
    first = run(llm.chat(msgs))
    again = run(llm.chat(msgs))
    assert len(backend.calls) == 1 and again.cached and again.text == first.text
    run(llm.chat(msgs, sample_index=1))
    run(llm.chat(msgs, SamplingParams(temperature=0.7)))
    assert len(backend.calls) == 3
    assert request_key("a", msgs, SamplingParams(), 0) != request_key("b", msgs, SamplingParams(), 0)
    summary = llm.accounting.summary()["solver"]
    assert summary["calls"] == 4 and summary["cache_hits"] == 1 and summary["errors"] == 0
    assert summary["prompt_tokens"] == 4 * 2


def test_errors_are_counted_and_raised():
    llm = LLM(ScriptedBackend([("never-matches", "x")]), role="judge")
    with pytest.raises(LLMError, match="no rule matches"):
        run(llm.chat([{"role": "user", "content": "hi"}]))
    assert llm.accounting.summary()["judge"]["errors"] == 1


def test_runtime_roles_share_cache_and_accounting(tmp_path):
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps({"match": "plan", "reply": "<Yes>"}) + "\n")
    cfg = LLMConfig.model_validate(
        {"default": {"kind": "scripted", "replies": str(replies)}, "cache": str(tmp_path / "c.sqlite")}
    )
    runtime = LLMRuntime(cfg)
    planner, judge = runtime.for_role("planner"), runtime.for_role("judge")
    assert planner.backend is judge.backend
    run(planner.chat([{"role": "user", "content": "plan"}]))
    run(judge.chat([{"role": "user", "content": "plan"}]))
    usage = runtime.accounting.summary()
    assert usage["planner"]["cache_hits"] == 0 and usage["judge"]["cache_hits"] == 1
    assert usage["total"]["calls"] == 2
    runtime.accounting.write(tmp_path / "usage.json")
    assert json.loads((tmp_path / "usage.json").read_text())["total"]["calls"] == 2
    run(runtime.close())


WORKER = textwrap.dedent(
    """
    import asyncio, json, sys
    from pipelines.llm.cache import RequestCache
    from pipelines.llm.client import LLM
    from pipelines.llm.scripted import ScriptedBackend
    from pipelines.io import write_json_atomic

    cache_path, calls_path, out_path, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    calls = open(calls_path, "a")

    def reply(messages):
        text = messages[-1]["content"]
        calls.write(text + "\\n"); calls.flush()
        return "answer to " + text

    async def main():
        llm = LLM(ScriptedBackend([("q", reply)], delay_s=delay), cache=RequestCache(cache_path))
        sem = asyncio.Semaphore(4)
        async def one(i):
            async with sem:
                r = await llm.chat([{"role": "user", "content": f"q{i}"}])
                return r.text
        texts = await asyncio.gather(*(one(i) for i in range(40)))
        total = llm.accounting.summary()["total"]
        usage = {k: total[k] for k in ("calls", "prompt_tokens", "completion_tokens")}
        write_json_atomic(out_path, {"texts": texts, "usage": usage})

    asyncio.run(main())
    """
)


ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _cached_prompts(cache_path):
    try:
        with sqlite3.connect(cache_path) as db:
            return len(db.execute("SELECT key FROM calls").fetchall())
    except sqlite3.OperationalError:  # the worker has not created the table yet
        return 0


def test_killed_run_resumes_without_repeating_finished_calls(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env_cmd = [sys.executable, str(script)]
    # Reference: one uninterrupted run.
    subprocess.run(
        env_cmd + [str(tmp_path / "ref.sqlite"), str(tmp_path / "ref.calls"), str(tmp_path / "ref.json"), "0"],
        check=True,
        cwd=ROOT,
        env=ENV,
    )
    # Run killed halfway.
    cache, calls, out = tmp_path / "c.sqlite", tmp_path / "run1.calls", tmp_path / "out.json"
    proc = subprocess.Popen(env_cmd + [str(cache), str(calls), str(out), "0.05"], cwd=ROOT, env=ENV)
    import time

    deadline = time.time() + 60
    while time.time() < deadline and (not cache.exists() or _cached_prompts(cache) < 12):
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    finished = _cached_prompts(cache)
    assert 12 <= finished < 40, "the kill must land halfway"
    assert not out.exists(), "no half-written output after a kill"
    # Resume.
    calls2 = tmp_path / "run2.calls"
    subprocess.run(env_cmd + [str(cache), str(calls2), str(out), "0"], check=True, cwd=ROOT, env=ENV)
    repeated = calls2.read_text().split()
    assert len(repeated) == 40 - finished, "the resumed run makes only the unfinished calls"
    resumed, reference = json.loads(out.read_text()), json.loads((tmp_path / "ref.json").read_text())
    assert resumed["texts"] == reference["texts"]
    # cached replies keep the usage they had when made: the resumed run reports the same tokens
    assert resumed["usage"] == reference["usage"] and reference["usage"]["completion_tokens"] == 40 * 3


def test_any_backend_failure_becomes_an_llm_error():
    def boom(messages):
        raise RuntimeError("CUDA out of memory")

    llm = LLM(ScriptedBackend([("hi", boom)]), role="planner")
    with pytest.raises(LLMError, match="RuntimeError: CUDA out of memory"):
        run(llm.chat([{"role": "user", "content": "hi"}]))
    assert llm.accounting.summary()["planner"]["errors"] == 1


# -- per-role sampling, role names, the call slot ------------------------------------------------


def _config(tmp_path, **extra):
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps({"match": ".", "reply": "ok"}) + "\n")
    return LLMConfig.model_validate({"default": {"kind": "scripted", "replies": str(replies)}, "cache": None} | extra)


def test_role_sampling_overlays_the_global_sampling_and_keeps_the_shared_backend(tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"match": ".", "reply": "judge"}) + "\n")
    cfg = _config(
        tmp_path,
        sampling={"temperature": 0.2, "max_tokens": 300, "stop": ["", "###"]},
        roles={
            "solver": {"sampling": {"max_tokens": 512}},
            "planner": {"sampling": {"seed": 4, "n": 2}},
            "numerical_judge": {"kind": "scripted", "replies": str(other), "sampling": {"temperature": 0.7}},
        },
    )
    runtime = LLMRuntime(cfg)
    solver, planner, judge, critic = (runtime.for_role(r) for r in ("solver", "planner", "numerical_judge", "critic"))
    assert solver.default_params == SamplingParams(temperature=0.2, max_tokens=512, stop=("###",))
    assert planner.default_params == SamplingParams(temperature=0.2, max_tokens=300, stop=("###",), seed=4, n=2)
    assert judge.default_params == SamplingParams(temperature=0.7, max_tokens=300, stop=("###",))
    assert critic.default_params == SamplingParams(temperature=0.2, max_tokens=300, stop=("###",))
    assert solver.backend is planner.backend is critic.backend  # sampling-only entries share the default
    assert judge.backend is not solver.backend and run(judge.chat([{"role": "user", "content": "x"}])).text == "judge"
    same_spec_other_sampling = _config(
        tmp_path,
        roles={
            "a": {"kind": "scripted", "replies": str(other), "sampling": {"temperature": 0.1}},
            "b": {"kind": "scripted", "replies": str(other), "sampling": {"temperature": 0.9}},
        },
    )
    rt = LLMRuntime(same_spec_other_sampling)
    assert rt.backend_for("a") is rt.backend_for("b")  # one engine, two samplings


def test_role_config_errors_name_the_fix(tmp_path):
    cfg = _config(tmp_path, roles={"numerical_judg": {"sampling": {"temperature": 0.5}}, "solver": {"sampling": {}}})
    with pytest.raises(ValueError) as err:
        cfg.check_roles(["planner", "solver", "numerical_judge"])
    assert str(err.value) == (
        "unknown role 'numerical_judg' in llm.roles (did you mean 'numerical_judge'?); "
        "valid roles: planner, solver, numerical_judge"
    )
    cfg.check_roles(("solver", "numerical_judg"))  # all known: no error
    with pytest.raises(ValueError, match="temprature"):
        _config(tmp_path, roles={"solver": {"sampling": {"temprature": 0.5}}})
    with pytest.raises(ValueError, match="does not match any of the expected tags"):
        _config(tmp_path, roles={"solver": {"kind": "openia", "model": "x"}})
    with pytest.raises(ValueError, match="put the run's sampling under llm.sampling"):
        LLMConfig.model_validate(
            {"default": {"kind": "scripted", "replies": "r.jsonl", "sampling": {"temperature": 1.0}}}
        )


def test_call_slot_is_taken_after_a_cache_miss_only(tmp_path):
    from pipelines.llm.limits import CallLimiter, install

    backend = echo_backend(delay_s=0.02)
    llm = LLM(backend, cache=RequestCache(tmp_path / "c.sqlite"))
    hello = [{"role": "user", "content": "cached"}]

    async def main():
        limiter = CallLimiter(1)
        install(limiter)
        await llm.chat(hello)  # fill the cache
        await limiter.acquire()  # someone else holds the run's only slot
        hit = await asyncio.wait_for(llm.chat(hello), timeout=2)  # a hit needs no slot
        miss = asyncio.create_task(llm.chat([{"role": "user", "content": "fresh"}]))
        await asyncio.sleep(0.1)
        waiting = not miss.done()  # a miss waits for the slot
        limiter.release()
        fresh = await asyncio.wait_for(miss, timeout=2)
        # many misses at once never exceed the limit (and nothing deadlocks at limit 1)
        texts = await asyncio.gather(*(llm.chat([{"role": "user", "content": f"q{i}"}]) for i in range(6)))
        return hit, waiting, fresh, texts, limiter

    hit, waiting, fresh, texts, limiter = run(main())
    assert hit.cached and waiting and fresh.text == "echo fresh" and not fresh.cached
    assert [t.text for t in texts] == [f"echo q{i}" for i in range(6)]
    assert limiter.peak == 1 and limiter.in_use == 0


def test_preflight_builds_every_backend_and_is_a_no_op_for_local_ones(tmp_path):
    cfg = _config(tmp_path, roles={"solver": {"sampling": {"max_tokens": 9}}})
    runtime = LLMRuntime(cfg)
    run(runtime.preflight())
    assert len(runtime._backends) == 1
    run(runtime.close())


def test_latency_percentiles_are_numpys():
    """The hand-written nearest rank gave p50([1, 2]) = 2; numpy's linear interpolation gives 1.5."""
    import numpy as np

    from pipelines.llm.accounting import RoleUsage

    usage = RoleUsage(latencies=[1.0, 2.0])
    assert usage.summary()["latency_p50_s"] == 1.5
    values = [0.3, 0.1, 0.9, 0.5, 0.7, 0.2, 1.4, 0.05, 0.6, 0.8]
    summary = RoleUsage(latencies=values).summary()
    assert summary["latency_p95_s"] == round(float(np.percentile(values, 95)), 4) == 1.175
    assert RoleUsage().summary()["latency_p50_s"] == 0.0
