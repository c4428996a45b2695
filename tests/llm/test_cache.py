"""The request cache: namespaced keys, never blocking the event loop, what is not cached, broken files."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import random
import sqlite3
import time

import pytest

from pipelines.llm.cache import CacheError, RequestCache, request_key
from pipelines.llm.client import LLM, LLMRuntime
from pipelines.llm.config import LLMConfig
from pipelines.llm.scripted import ScriptedBackend
from pipelines.llm.types import ChatResult, Choice, LLMError, SamplingParams, Usage

MSGS = [{"role": "user", "content": "Name a fraction."}]


class SamplingBackend:
    """Answers like a model at temperature > 0: a fresh random reply every call."""

    identity = "sampler"

    def __init__(self, seed: int = 0):
        self.random = random.Random(seed)
        self.calls = 0

    async def chat(self, messages, params):
        self.calls += 1
        text = f"{self.random.randint(1, 9)}/{self.random.randint(10, 99)}"
        return ChatResult(choices=[Choice(text)], usage=Usage(prompt_tokens=7, completion_tokens=self.calls))

    async def close(self):
        return None


def test_key_is_namespaced_by_attempt_and_tag_and_unchanged_without_them():
    params = SamplingParams(temperature=0.8)
    keys = {
        request_key("m", MSGS, params, 0),
        request_key("m", MSGS, params, 0, attempt=1),
        request_key("m", MSGS, params, 1),
        request_key("m", MSGS, params, 0, tag="expert1"),
        request_key("m", MSGS, params, 0, tag="expert1", attempt=1),
        request_key("m", MSGS, params, 0, tag="round2"),
    }
    assert len(keys) == 6  # expert 0's retry never equals expert 1's first call
    # a first attempt without a tag keeps the key earlier releases wrote (existing caches stay valid)
    legacy = json.dumps(
        {"model": "m", "messages": MSGS, "params": params.to_dict(), "sample": 0},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    assert request_key("m", MSGS, params, 0) == hashlib.sha256(legacy.encode()).hexdigest()


def test_identical_prompts_in_two_slots_sample_independently_and_both_replay(tmp_path):
    params = SamplingParams(temperature=1.0)

    async def run_slots(backend):
        cache = RequestCache(tmp_path / "c.sqlite")
        llm = LLM(backend, cache=cache, default_params=params)
        slots = [("expert0", 0), ("expert1", 0), ("expert0", 1), ("expert1", 1)]  # (tag, attempt)
        results = [await llm.chat(MSGS, sample_index=3, tag=tag, attempt=attempt) for tag, attempt in slots]
        cache.close()
        return [r.text for r in results], [r.cached for r in results], llm.accounting.summary()["total"]

    first = SamplingBackend(seed=1)
    texts, cached, usage = asyncio.run(run_slots(first))
    assert first.calls == 4 and not any(cached)
    assert len(set(texts)) == 4  # each slot its own sample
    again = SamplingBackend(seed=2)  # would answer differently if asked
    replay, cached, replay_usage = asyncio.run(run_slots(again))
    assert again.calls == 0 and all(cached) and replay == texts
    # a cache hit is accounted with the usage the reply had when it was made
    assert replay_usage["completion_tokens"] == usage["completion_tokens"] == 1 + 2 + 3 + 4
    assert replay_usage["prompt_tokens"] == usage["prompt_tokens"] == 28


def test_a_locked_cache_file_never_blocks_the_event_loop(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = RequestCache(path, timeout_s=0.4)
    other = sqlite3.connect(path, timeout=0.1, isolation_level=None)  # another process's writer
    other.execute("BEGIN IMMEDIATE")  # holds the write lock

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        llm = LLM(ScriptedBackend([("fraction", "1/2")]), cache=cache)
        start = time.perf_counter()
        result = await llm.chat(MSGS)
        elapsed = time.perf_counter() - start
        task.cancel()
        return result, elapsed, ticks, llm

    result, elapsed, ticks, llm = asyncio.run(main())
    other.rollback()
    other.close()
    assert result.text == "1/2" and not result.cached
    assert elapsed >= 0.35  # the write really waited for the lock ...
    assert ticks >= 15  # ... on the cache thread, while the event loop kept running
    assert cache.skipped_writes == 1 and len(cache) == 0  # given up after the short timeout, not cached
    cache.close()


class FixedBackend:
    identity = "fixed"

    def __init__(self, *choices: Choice):
        self.choices = list(choices)
        self.calls = 0

    async def chat(self, messages, params):
        self.calls += 1
        return ChatResult(choices=list(self.choices), usage=Usage(prompt_tokens=3, completion_tokens=1))

    async def close(self):
        return None


@pytest.mark.parametrize(
    "choices",
    [
        (Choice("", "stop"),),
        (Choice("  \n", "length"), Choice("", "stop")),
        (Choice("I cannot", "content_filter"),),
        (Choice("fine", "stop"), Choice("", "content_filter")),
    ],
)
def test_empty_and_content_filtered_replies_are_not_cached(tmp_path, choices):
    backend = FixedBackend(*choices)
    cache = RequestCache(tmp_path / "c.sqlite")
    llm = LLM(backend, cache=cache, role="judge")
    first = asyncio.run(llm.chat(MSGS))
    second = asyncio.run(llm.chat(MSGS))
    assert [c.text for c in first.choices] == [c.text for c in choices]  # returned to the caller as they are
    assert backend.calls == 2 and not second.cached and len(cache) == 0
    summary = llm.accounting.summary()["judge"]
    assert summary["not_cached"] == 2 and summary["calls"] == 2 and summary["cache_hits"] == 0
    good = FixedBackend(Choice("3/4"), Choice("", "stop"))  # one non-empty choice is a reply worth keeping
    llm = LLM(good, cache=cache)
    asyncio.run(llm.chat(MSGS))
    assert asyncio.run(llm.chat(MSGS)).cached and good.calls == 1
    cache.close()


@pytest.mark.parametrize("content", [b"this is not a database" * 300, b"SQLite format 3\x00" + b"\x07" * 4000])
def test_a_corrupt_cache_file_is_one_error_naming_the_file_and_the_fix(tmp_path, content):
    path = tmp_path / "llm.sqlite"
    path.write_bytes(content)
    with pytest.raises(CacheError) as err:
        RequestCache(path)
    message = str(err.value)
    assert str(path) in message and "move it away" in message and "repeats the calls" in message
    assert isinstance(err.value, LLMError)
    replies = tmp_path / "r.jsonl"
    replies.write_text(json.dumps({"match": ".", "reply": "x"}) + "\n")
    config = LLMConfig.model_validate({"default": {"kind": "scripted", "replies": str(replies)}, "cache": str(path)})
    with pytest.raises(CacheError, match="move it away"):
        LLMRuntime(config)


def test_cache_reads_and_writes_from_many_tasks(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    counter = itertools.count()
    llm = LLM(ScriptedBackend([("q", lambda m: f"a{next(counter)}")]), cache=cache)

    async def main():
        msgs = [[{"role": "user", "content": f"q{i % 50}"}] for i in range(200)]
        first = await asyncio.gather(*(llm.chat(m) for m in msgs[:50]))
        again = await asyncio.gather(*(llm.chat(m) for m in msgs))
        return first, again

    first, again = asyncio.run(main())
    assert len(cache) == 50 and all(r.cached for r in again)
    assert [r.text for r in again] == [r.text for r in first] * 4
    cache.close()
