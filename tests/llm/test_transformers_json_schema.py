"""``json_schema`` in the transformers backend: xgrammar token masks inside batched generation.

A tiny random Qwen2 (real Qwen tokenizer, gibberish weights) shows the mask alone makes the reply
schema-valid JSON, or a valid prefix cut by ``max_tokens`` with finish_reason ``length``; in mixed
batches (several schemas, no schema) each row is constrained by its own grammar only and decodes
as it decodes alone, up to float error (:mod:`tests.llm.decoding_checks`). SmolLM2-135M-Instruct
checks real replies on three schemas, greedy and sampled.
"""

from __future__ import annotations

import asyncio
import json

import jsonschema  # installed with chromadb
import pytest
import xgrammar as xgr

from pipelines.llm.config import TransformersBackendConfig
from pipelines.llm.grammar import GrammarMask, SchemaGrammars, schema_key
from pipelines.llm.transformers_backend import TransformersBackend
from pipelines.llm.types import LLMError, SamplingParams
from tests.llm.decoding_checks import assert_rows_decode_as_alone, recorded_generate
from tests.tiny_models import load_qwen_tokenizer, smollm2_dir, tiny_qwen2

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("each_torch_thread_count")

COLOUR = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
        "fruits": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 3},
    },
    "required": ["colour", "fruits"],
}
ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}, "confident": {"type": "boolean"}},
    "required": ["answer", "confident"],
}
VERDICT = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["correct", "incorrect"]},
        "scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 4},
    },
    "required": ["verdict", "scores"],
}
SCHEMAS = [COLOUR, ANSWER, VERDICT]
PROMPTS = [
    "Name a colour and up to three fruits. Reply in JSON.",
    "What is 2+2? Reply in JSON.",
    "Is 'Paris is the capital of France' correct? Reply in JSON with scores.",
]


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def concurrently(backend, requests):
    async def go():
        return await asyncio.gather(*(backend.chat(user(p), params) for p, params in requests), return_exceptions=True)

    return asyncio.run(go())


def one_by_one(backend, requests):
    async def go():
        return [await backend.chat(user(p), params) for p, params in requests]

    return asyncio.run(go())


def make_backend(model, **overrides) -> TransformersBackend:
    spec = TransformersBackendConfig(kind="transformers", model=str(model), batch_wait_ms=100, **overrides)
    backend = TransformersBackend(spec)
    backend.load()
    return backend


def assert_schema_valid(text: str, schema: dict) -> None:
    jsonschema.validate(json.loads(text), schema)


def is_valid_prefix(backend: TransformersBackend, text: str, schema: dict) -> bool:
    """Whether ``text`` can still be continued into JSON valid for ``schema``."""
    return xgr.GrammarMatcher(backend.compile_schema(schema)).accept_string(text)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model_dir = tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2", init_std=0.3)
    return make_backend(model_dir, max_batch_size=16)


# -- the grammar cache -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen():
    """The Qwen tokenizer and its grammar cache, ``<|im_end|>`` as the one stop token."""
    tokenizer = load_qwen_tokenizer()
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return tokenizer, SchemaGrammars(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[stop]), stop


def test_second_compile_of_a_schema_is_a_cache_hit_and_key_order_matters():
    tokenizer = load_qwen_tokenizer()
    grammars = SchemaGrammars(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[tokenizer.eos_token_id])
    first = grammars.compile(COLOUR)
    spent = grammars.compile_seconds
    again = grammars.compile(json.loads(json.dumps(COLOUR)))  # an equal dict, not the same object
    assert again is first and (grammars.hits, grammars.misses) == (1, 1)
    # the hit compiled nothing (no wall-clock bound: a loaded machine makes any look-up slow at times)
    assert grammars.compile_seconds == spent == grammars.last_compile_seconds > 0
    reordered = {**COLOUR, "properties": dict(reversed(COLOUR["properties"].items()))}
    assert schema_key(reordered) != schema_key(COLOUR)  # property order is the order the JSON is written in
    assert grammars.compile(reordered) is not first and grammars.misses == 2
    assert grammars.compile_seconds > grammars.last_compile_seconds > 0  # a sum over both misses


def test_grammar_cache_keeps_the_most_recently_used_schemas():
    tokenizer = load_qwen_tokenizer()
    grammars = SchemaGrammars(
        tokenizer, vocab_size=len(tokenizer), stop_token_ids=[tokenizer.eos_token_id], max_cached=2
    )
    schemas = [{"enum": [word]} for word in ("red", "green", "blue")]
    first = grammars.compile(schemas[0])
    grammars.compile(schemas[1])
    assert grammars.compile(schemas[0]) is first  # a hit makes it the most recent
    grammars.compile(schemas[2])  # evicts "green", the least recently used
    assert len(grammars._compiled) == 2 and grammars.misses == 3
    assert grammars.compile(schemas[0]) is first and grammars.misses == 3
    grammars.compile(schemas[1])
    assert grammars.misses == 4


def test_mask_allows_eos_only_once_the_json_is_complete_and_leaves_other_rows_alone(qwen):
    tokenizer, grammars, stop = qwen
    reply = tokenizer.encode('{"answer": 4, "confident": true}')
    ended_at = [None, None]
    mask = GrammarMask([grammars.compile(ANSWER), None], ended_at)
    history = torch.zeros((2, 1), dtype=torch.long)
    allowed_per_step = []
    for token in [*reply, None]:
        scores = mask(history, torch.zeros((2, len(tokenizer))))
        assert torch.all(scores[1] == 0)  # the unconstrained row is never masked
        allowed_per_step.append(set(torch.nonzero(scores[0] == 0).flatten().tolist()))
        if token is not None:
            assert token in allowed_per_step[-1]
            history = torch.cat([history, torch.tensor([[token], [0]])], dim=1)
    assert all(stop not in allowed for allowed in allowed_per_step[:-1])  # EOS only at the end
    assert allowed_per_step[-1] == {stop} and mask.rejected == 0
    assert len(allowed_per_step[0]) < 100  # '{' and the like, out of 151k tokens
    ended_at[0] = len(reply)  # a row the stopping criterion ended is left alone
    assert torch.all(mask(torch.cat([history, torch.tensor([[stop], [0]])], dim=1), torch.zeros((2, 8))) == 0)


def test_a_schema_that_cannot_compile_is_a_clear_error_for_that_request_only(tiny):
    bad = {"type": "object", "properties": {"x": {"type": "nonsense"}}}
    calls = tiny.generate_calls
    failed, fine = concurrently(
        tiny, [("hi", SamplingParams(max_tokens=4, json_schema=bad)), ("hi", SamplingParams(max_tokens=4))]
    )
    assert isinstance(failed, LLMError)
    assert str(failed) == 'json_schema cannot be compiled: Unsupported type "nonsense"'
    assert fine.usage.completion_tokens == 4 and tiny.generate_calls == calls + 1
    misses = tiny.grammars.misses
    with pytest.raises(LLMError, match="cannot be compiled"):
        one_by_one(tiny, [("hi", SamplingParams(json_schema=bad))])
    assert tiny.grammars.misses == misses  # the failure is remembered, not compiled again


# -- tiny random Qwen2: the mask alone makes the JSON ------------------------------------------


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_random_weights_still_give_schema_valid_json_or_a_valid_prefix_cut_by_length(tiny, temperature):
    requests = [
        (prompt, SamplingParams(max_tokens=48, temperature=temperature, seed=3, json_schema=schema))
        for prompt in PROMPTS
        for schema in SCHEMAS
    ]
    results = concurrently(tiny, requests)
    complete = 0
    for (_, params), result in zip(requests, results, strict=True):
        if result.finish_reason == "stop":
            assert_schema_valid(result.text, params.json_schema)
            assert result.usage.completion_tokens < 48
            complete += 1
        else:
            assert result.finish_reason == "length" and result.usage.completion_tokens == 48
            assert is_valid_prefix(tiny, result.text, params.json_schema)
    assert complete >= 3  # gibberish weights, yet whole schema-valid replies
    assert tiny.grammar_rejected == 0


def test_max_tokens_cuts_constrained_json_with_finish_reason_length(tiny):
    result = one_by_one(tiny, [(PROMPTS[0], SamplingParams(max_tokens=3, json_schema=COLOUR))])[0]
    assert result.finish_reason == "length" and result.usage.completion_tokens == 3
    assert result.text.startswith("{") and is_valid_prefix(tiny, result.text, COLOUR)
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.text)


def test_mixed_batch_rows_are_each_constrained_by_their_own_grammar_and_decode_as_alone_greedy(tiny):
    requests = [(p, SamplingParams(max_tokens=40, json_schema=s)) for p, s in zip(PROMPTS, SCHEMAS, strict=True)]
    requests += [(p, SamplingParams(max_tokens=12)) for p in PROMPTS[:2]]  # unconstrained rows
    requests += [(PROMPTS[1], SamplingParams(max_tokens=40, json_schema=ANSWER, n=2))]
    for schema in SCHEMAS:  # compiled before: every request reaches the batcher within its wait
        tiny.compile_schema(schema)
    calls = tiny.generate_calls
    with recorded_generate(tiny) as recorded:
        batched = concurrently(tiny, requests)
    assert tiny.generate_calls == calls + 1 == calls + len(recorded)  # different schemas and none share ONE generate
    assert assert_rows_decode_as_alone(tiny, recorded) == sum(r.usage.completion_tokens for r in batched)
    for (_, params), result in zip(requests[:3], batched[:3], strict=True):
        assert result.text.startswith("{") and is_valid_prefix(tiny, result.text, params.json_schema)
    for (_, params), result in zip(requests[3:5], batched[3:5], strict=True):
        assert result.usage.completion_tokens == params.max_tokens
        assert not result.text.lstrip().startswith("{")  # the unconstrained rows were not masked
    for choice in batched[5].choices:  # greedy n=2: each choice constrained
        assert choice.text.startswith("{") and is_valid_prefix(tiny, choice.text, ANSWER)
    assert tiny.grammar_rejected == 0
    again = concurrently(tiny, requests)  # the same batch again: the same texts
    assert [[c.text for c in r.choices] for r in again] == [[c.text for c in r.choices] for r in batched]


def test_sampled_choices_of_one_request_are_each_constrained(tiny):
    params = SamplingParams(max_tokens=48, temperature=1.0, seed=5, n=4, json_schema=ANSWER)
    result = one_by_one(tiny, [(PROMPTS[1], params)])[0]
    texts = [c.text for c in result.choices]
    assert len(texts) == 4 and len(set(texts)) >= 2
    for choice in result.choices:
        if choice.finish_reason == "stop":
            assert_schema_valid(choice.text, ANSWER)
        else:
            assert is_valid_prefix(tiny, choice.text, ANSWER)


def test_a_pydantic_output_schema_with_refs_literals_and_optionals_is_enforced(tiny):
    from typing import Literal

    from pydantic import BaseModel, Field

    class Step(BaseModel):
        kind: Literal["compute", "check"]
        value: int | None = None

    class Plan(BaseModel):
        steps: list[Step] = Field(min_length=1, max_length=2)
        done: bool

    schema = Plan.model_json_schema()  # what an Agent with output=Plan sends: $defs, anyOf, titles
    assert "$defs" in schema
    results = concurrently(
        tiny,
        [
            (p, SamplingParams(max_tokens=64, temperature=0.7, seed=s, json_schema=schema))
            for p in PROMPTS
            for s in (1, 2)
        ],
    )
    finished = [r for r in results if r.finish_reason == "stop"]
    assert len(finished) >= 2
    for result in finished:
        Plan.model_validate_json(result.text)
    for result in results:
        assert is_valid_prefix(tiny, result.text, schema)


# -- SmolLM2-135M-Instruct ---------------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_replies_validate_against_each_schema_greedy_and_sampled_and_batch_decodes_as_alone():
    backend = make_backend(smollm2_dir(), max_batch_size=16)
    greedy = [(p, SamplingParams(max_tokens=64, json_schema=s)) for p, s in zip(PROMPTS, SCHEMAS, strict=True)]
    sampled = [
        (p, SamplingParams(max_tokens=64, temperature=0.8, seed=11, n=2, json_schema=s))
        for p, s in zip(PROMPTS, SCHEMAS, strict=True)
    ]
    requests = greedy + sampled
    for schema in SCHEMAS:  # compiled before: every request reaches the batcher within its wait
        backend.compile_schema(schema)
    with recorded_generate(backend) as recorded:
        batched = concurrently(backend, requests)
    for (_, params), result in zip(requests, batched, strict=True):
        for choice in result.choices:
            assert choice.finish_reason == "stop", choice.text
            assert_schema_valid(choice.text, params.json_schema)
    assert backend.generate_calls == len(recorded) == 1 and backend.grammar_rejected == 0
    compared = assert_rows_decode_as_alone(backend, recorded, atol=5e-3)
    assert compared == sum(r.usage.completion_tokens for r in batched)
