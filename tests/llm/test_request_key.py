"""The request key is put together from its parts for speed; it must stay byte for byte the sha256 of
the JSON text earlier releases hashed, so existing caches keep their hits. And the runtime's own
cost per call: the cache's hand-over per loop turn, the garbage-collector threshold while busy."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import random

from pipelines.kgc.agents.answer_bounds import candidate_spans
from pipelines.kgc.agents.experts import expert_role
from pipelines.kgc.schema import load_schema
from pipelines.llm.cache import RequestCache, request_key
from pipelines.llm.client import LLM, _busy
from pipelines.llm.scripted import ScriptedBackend
from pipelines.llm.types import ChatResult, Choice, SamplingParams
from pipelines.tagging.agents.numerical_judge import ArgsOutput


def reference_key(identity, messages, params, sample_index, *, attempt=0, tag=""):
    """What every earlier release hashed (pipelines/llm/cache.py before the parts were assembled)."""
    payload = {"model": identity, "messages": messages, "params": params.to_dict(), "sample": sample_index}
    if attempt:
        payload["attempt"] = attempt
    if tag:
        payload["tag"] = tag
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_keys_equal_the_earlier_releases_keys():
    rng = random.Random(7)
    sentence = "Lionel Messi was born in Rosario , Argentina ."
    schemas = [
        None,
        ArgsOutput.model_json_schema(),
        expert_role("ee").answer_schema(load_schema("ace05")),
        expert_role("ner").answer_schema(
            load_schema("conllpp"), spans=candidate_spans(sentence, language="en", max_chars=20)
        ),
        {"type": "number", "minimum": 1e-5, "maximum": 1e22},  # floats json writes in exponent form
    ]

    def text() -> str:
        pools = [(0, 127), (128, 0xD7FF), (0xE000, 0x10FFFF)]
        return "".join(chr(rng.randint(*rng.choice(pools))) for _ in range(rng.randint(0, 30)))

    for i in range(2000):
        messages = [{"role": rng.choice(["system", "user"]), "content": text()} for _ in range(rng.randint(1, 3))]
        if i % 40 == 0:
            messages[0]["extra"] = [1.5e-7, {"b": text()}]  # not a string: the slow path
        params = SamplingParams(
            temperature=rng.choice([0.0, 0.7, 1e-5, 0, 2]),
            top_p=rng.choice([1.0, 0.95, 1]),
            max_tokens=rng.randint(1, 900),
            stop=tuple(text() for _ in range(rng.randint(0, 2))),
            seed=rng.choice([None, 3]),
            n=rng.randint(1, 3),
            json_schema=rng.choice(schemas),
        )
        args = (rng.choice(["openai:qwen#json_schema", "模型"]), messages, params, rng.randint(0, 10**6))
        options = {"attempt": rng.choice([0, 0, 2]), "tag": rng.choice(["", "expert0/round1", "专家"])}
        assert request_key(*args, **options) == reference_key(*args, **options)
    # the schema's text is kept per schema object: an equal schema in another object gives the same key
    schema = ArgsOutput.model_json_schema()
    params = SamplingParams(json_schema=schema)
    copy = SamplingParams(json_schema=json.loads(json.dumps(schema)))
    assert request_key("m", [{"role": "user", "content": "x"}], params, 0) == request_key(
        "m", [{"role": "user", "content": "x"}], copy, 0
    )


def test_rows_finishing_in_one_loop_turn_are_handed_over_together(tmp_path):
    cache = RequestCache(tmp_path / "cache.sqlite")
    commits = []
    commit = cache._commit
    cache._commit = lambda rows: commits.append(len(rows)) or commit(rows)

    async def run():
        result = ChatResult([Choice("reply")])
        await asyncio.gather(*(cache.aput(f"k{i}", result) for i in range(300)))

    asyncio.run(run())
    assert sum(commits) == 300 and len(commits) <= 2 and len(cache) == 300
    cache.close()


def test_the_young_generation_threshold_is_raised_only_while_calls_are_in_flight():
    seen = []

    class Recording(ScriptedBackend):
        async def chat(self, messages, params):
            seen.append(gc.get_threshold()[0])
            return await super().chat(messages, params)

    before = gc.get_threshold()
    llm = LLM(Recording([(".", "ok")], delay_s=0.01))

    async def run():
        await asyncio.gather(*(llm.chat([{"role": "user", "content": str(i)}]) for i in range(5)))

    asyncio.run(run())
    assert seen == [_busy.threshold] * 5 and gc.get_threshold() == before and _busy.in_flight == 0


def test_the_same_request_in_flight_twice_is_sent_once(tmp_path):
    cache = RequestCache(tmp_path / "cache.sqlite")
    backend = ScriptedBackend([("empty", ""), (".", "ok")], delay_s=0.05)
    llm = LLM(backend, cache=cache)
    same = [{"role": "user", "content": "same"}]

    async def run():
        first = await asyncio.gather(llm.chat(same), llm.chat(same), llm.chat(same, tag="other"))
        empty = [{"role": "user", "content": "empty"}]  # not cacheable: each call goes out, as one by one
        second = await asyncio.gather(llm.chat(empty), llm.chat(empty))
        return first, second

    (a, b, c), (d, e) = asyncio.run(run())
    assert a.text == b.text == c.text == "ok" and [a.cached, b.cached, c.cached] == [False, True, False]
    assert len(backend.calls) == 2 + 2 and d.text == e.text == ""
    summary = llm.accounting.summary()["default"]
    assert summary["calls"] == 5 and summary["cache_hits"] == 1 and summary["not_cached"] == 2
    assert cache.in_flight == {}
    cache.close()
