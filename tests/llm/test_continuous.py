"""Continuous batching in the transformers backend (``scheduling: continuous``), on SmolLM2-135M-Instruct.

A request alone takes the same computation in both schedulings, so its reply must be the same text;
in a batch whose rows come and go, a row's logits equal its logits alone only up to float error, so
there each greedy token is checked against the row's own logits alone (teacher-forced), as
:mod:`tests.llm.decoding_checks` does for the batch path."""

from __future__ import annotations

import asyncio
import json

import pytest

from pipelines.llm.config import TransformersBackendConfig
from pipelines.llm.continuous import supports_continuous
from pipelines.llm.transformers_backend import TransformersBackend, chat_prompt_ids
from pipelines.llm.types import SamplingParams
from tests.tiny_models import smollm2_dir

torch = pytest.importorskip("torch")

SCHEMA = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "maxLength": 60},
        "entities": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {"type": {"enum": ["PER", "LOC", "ORG"]}, "text": {"type": "string", "maxLength": 30}},
                "required": ["type", "text"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["reason", "entities"],
    "additionalProperties": False,
}
MIXED = [
    ("Extract the entities: Barack Obama visited Paris.", SamplingParams(max_tokens=48, json_schema=SCHEMA)),
    ("Name a fruit.", SamplingParams(temperature=0.9, top_p=0.9, seed=5, n=2, max_tokens=16)),
    ("Describe London in one sentence.", SamplingParams(max_tokens=40, stop=["."])),
    ("Say hi.", SamplingParams(max_tokens=6)),
]
GREEDY = [
    ("What is the capital of Italy?", 24),
    ("Count to ten.", 40),
    ("Who wrote Hamlet?", 8),
    ("Write a short poem about the sea.", 48),
    ("What is water made of?", 16),
    ("Name a colour.", 4),
]


def backend(scheduling: str, **overrides) -> TransformersBackend:
    spec = TransformersBackendConfig(
        kind="transformers", model=str(smollm2_dir()), scheduling=scheduling, threads=2, **overrides
    )
    made = TransformersBackend(spec)
    made.load()
    return made


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def replies(results) -> list[tuple]:
    return [([(c.text, c.finish_reason) for c in r.choices], r.usage.completion_tokens) for r in results]


def test_a_request_alone_gives_the_batch_paths_reply_sampled_constrained_and_stopped():
    async def alone(made):
        try:
            return [await made.chat(user(prompt), params) for prompt, params in MIXED]
        finally:
            await made.close()

    batch, continuous = backend("batch"), backend("continuous")
    assert batch.decoder is None and continuous.decoder is not None
    expected, got = asyncio.run(alone(batch)), asyncio.run(alone(continuous))
    assert replies(got) == replies(expected)
    assert json.loads(got[0].text)["entities"] is not None and got[0].finish_reason == "stop"  # complete JSON
    assert len({c.text for c in got[1].choices}) == 2  # two seeded choices, each its own stream
    assert got[2].finish_reason == "stop" and "." not in got[2].text


def test_rows_join_and_leave_between_steps_and_each_token_is_the_rows_own_greedy_token():
    made = backend("continuous", max_batch_size=3, batch_wait_ms=0)
    decoder, finish, tokens_of = made.decoder, made.decoder.finish, {}

    def recording_finish(job):  # the tokens each row really generated, by prompt
        tokens_of[tuple(job.request.prompt_ids)] = job.rows[0].tokens
        return finish(job)

    decoder.finish = recording_finish

    async def staggered():
        async def one(i, prompt, max_tokens):
            await asyncio.sleep(0.4 * i)  # later requests arrive while earlier rows decode
            return await made.chat(user(prompt), SamplingParams(max_tokens=max_tokens))

        return await asyncio.gather(*(one(i, p, m) for i, (p, m) in enumerate(GREEDY)))

    results = asyncio.run(staggered())
    generated = sum(r.usage.completion_tokens for r in results)
    assert len(decoder.prefill_rows) >= 3 and sum(decoder.prefill_rows) == len(GREEDY)
    assert decoder.steps < generated - len(GREEDY)  # rows shared steps: fewer forwards than tokens
    assert decoder.grammar_rejected == 0
    for (prompt, max_tokens), result in zip(GREEDY, results, strict=True):
        assert (result.finish_reason == "length") == (result.usage.completion_tokens == max_tokens), result
        prompt_ids = chat_prompt_ids(made.tokenizer, user(prompt), "smollm2")
        tokens = tokens_of[tuple(prompt_ids)]
        assert len(tokens) == result.usage.completion_tokens
        with torch.inference_mode():  # the row alone, its reply teacher-forced
            logits = made.model(input_ids=torch.tensor([prompt_ids + tokens])).logits[0, len(prompt_ids) - 1 : -1]
        chosen = logits.gather(1, torch.tensor(tokens)[:, None])[:, 0]
        assert torch.all(chosen >= logits.max(-1).values - 5e-3), (prompt, result.text)
    asyncio.run(made.close())


def test_a_failed_prefill_fails_its_requests_and_the_next_request_is_answered():
    made = backend("continuous")
    prefill = made.decoder._prefill

    def broken(rows):
        raise RuntimeError("prefill broke")

    async def go():
        made.decoder._prefill = broken
        with pytest.raises(RuntimeError, match="prefill broke"):
            await asyncio.wait_for(made.chat(user("Say hi."), SamplingParams(max_tokens=4)), 60)
        made.decoder._prefill = prefill
        result = await asyncio.wait_for(made.chat(user("Say hi."), SamplingParams(max_tokens=4)), 60)
        await made.close()
        return result

    assert asyncio.run(go()).usage.completion_tokens >= 1


def test_a_plain_cache_model_supports_it_and_an_unknown_scheduling_is_refused():
    made = backend("batch")
    assert supports_continuous(made.model)
    with pytest.raises(ValueError, match="scheduling"):
        TransformersBackendConfig(kind="transformers", model="m", scheduling="rolling")


def test_a_cancelled_request_leaves_the_batch_at_the_next_step_and_the_decoder_goes_on():
    made = backend("continuous")
    hi = SamplingParams(max_tokens=6)

    async def run():
        try:
            before = await made.chat(user("Say hi."), hi)
            story = asyncio.create_task(
                made.chat(user("Write a long story about a ship at sea."), SamplingParams(max_tokens=400))
            )
            while made.decoder.steps < 8:
                await asyncio.sleep(0.005)
            at_cancel = made.decoder.steps
            story.cancel()
            with pytest.raises(asyncio.CancelledError):
                await story
            for _ in range(2000):  # the row leaves before the next step (not 390 steps later)
                if not made.decoder._rows:
                    break
                await asyncio.sleep(0.005)
            left_after = made.decoder.steps - at_cancel
            after = await made.chat(user("Say hi."), hi)
            return before, left_after, after
        finally:
            await made.close()

    before, left_after, after = asyncio.run(run())
    assert left_after <= 3, left_after
    assert replies([after]) == replies([before]) and after.choices[0].text  # alone again: the same reply
