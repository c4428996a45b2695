"""Agent output modes, typed output, per-agent sampling, n choices, attempt/tag and the call slot."""

import asyncio
import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from pipelines.agents import Agent, AgentSchemaError, CallLimiter, ParseError, call_slot
from pipelines.llm.client import LLM
from pipelines.llm.limits import install
from pipelines.llm.types import ChatResult, Choice, LLMError, SamplingParams, Usage

FIXTURES = Path(__file__).parent / "fixtures"


class Verdict(BaseModel):
    reasoning: str
    answer: Literal["Yes", "No"]

    def to_result(self) -> bool:
        return self.answer == "Yes"


def parse_text(text: str) -> bool:
    if "<Yes>" in text:
        return True
    if "<No>" in text:
        return False
    raise ParseError("no <Yes>/<No>")


def typed(**kwargs) -> Agent[bool]:
    return Agent("typed", FIXTURES, parse_text, output=Verdict, **kwargs)


class FakeLLM:
    """An LLM with the runtime's chat(attempt, tag) signature; records every call's arguments."""

    def __init__(self, replies, *, default_params=None, slot=False):
        self.replies = list(replies)
        self.calls = []
        self.default_params = default_params or SamplingParams(max_tokens=32)
        self.slot = slot

    async def chat(self, messages, params=None, *, sample_index=0, attempt=0, tag=""):
        self.calls.append({"params": params, "sample_index": sample_index, "attempt": attempt, "tag": tag})
        if self.slot:  # the runtime takes the run's slot inside chat
            async with call_slot():
                await asyncio.sleep(0)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        texts = reply if isinstance(reply, list) else [reply]
        return ChatResult([Choice(t) for t in texts], Usage(5, 2))


def test_json_mode_renders_schema_sends_it_and_maps_the_reply():
    agent = typed()
    text_prompt = agent.render("en", item="apple")
    json_prompt = agent.render("en", output_mode="json", item="apple")
    assert text_prompt[0]["content"] == "Say whether the item is a fruit. End with <Yes> or <No>."
    assert json_prompt[0]["content"] == text_prompt[0]["content"] + "\nReply with JSON matching this schema:\n" + (
        json.dumps(Verdict.model_json_schema(), indent=2)
    )
    llm = FakeLLM(['{"reasoning": "An apple is a fruit.", "answer": "Yes"}'])
    record = asyncio.run(agent.run(llm, {"item": "apple"}, sample_index=3, tag="judge-1", mode="json"))
    assert record.ok and record.parsed is True and record.mode == "json"
    sent = llm.calls[0]
    assert sent["params"].json_schema == Verdict.model_json_schema() and sent["params"].max_tokens == 32
    assert (sent["sample_index"], sent["attempt"], sent["tag"]) == (3, 0, "judge-1")
    row = record.to_trace("s")
    assert row["mode"] == "json" and row["tag"] == "judge-1" and row["unparseable"] == 0


def test_json_mode_retries_off_schema_replies_with_the_next_attempt():
    llm = FakeLLM(['{"answer": "Perhaps"}', "not json", '{"reasoning": "", "answer": "No"}'])
    record = asyncio.run(typed(max_attempts=3, retry_temperature=0.9).run(llm, {"item": "stone"}, mode="json"))
    assert record.ok and record.parsed is False and record.calls == 3 and record.unparseable == 2
    assert [c["attempt"] for c in llm.calls] == [0, 1, 2] and {c["sample_index"] for c in llm.calls} == {0}
    assert [c["params"].temperature for c in llm.calls] == [0.0, 0.9, 0.9]


def test_text_mode_sends_no_schema_and_json_mode_needs_an_output_model():
    llm = FakeLLM(["Yes it is. <Yes>"])
    record = asyncio.run(typed().run(llm, {"item": "pear"}))
    assert record.ok and llm.calls[0]["params"].json_schema is None
    untyped = Agent("typed", FIXTURES, parse_text)
    with pytest.raises(ValueError, match="'typed' declares no output model"):
        untyped.render("en", output_mode="json", item="x")
    with pytest.raises(ValueError, match="output mode 'yaml'"):
        typed().render("en", output_mode="yaml", item="x")


def test_sampling_overrides_overlay_the_role_params():
    base = SamplingParams(temperature=0.0, top_p=1.0, max_tokens=64, stop=("END",), seed=None, n=1)
    agent = typed(temperature=0.7, top_p=0.9, max_tokens=12, stop=["\n\n"], seed=5)
    params = agent.params(base)
    assert (params.temperature, params.top_p, params.max_tokens, params.stop, params.seed, params.n) == (
        0.7,
        0.9,
        12,
        ("\n\n",),
        5,
        1,
    )
    assert typed().params(base) == base  # no overrides: the role's params unchanged
    assert typed(retry_temperature=0.5).params(base, attempt=1).temperature == 0.5
    assert typed(temperature=0.3, retry_temperature=0.5).params(base, attempt=1).temperature == 0.3


def test_n_choices_are_each_parsed_and_kept():
    llm = FakeLLM([["maybe", "Sure. <No>", "Fruit. <Yes>"]])
    record = asyncio.run(typed(n=3).run(llm, {"item": "tomato"}))
    assert llm.calls[0]["params"].n == 3
    assert record.ok and record.parsed is False and record.reply == "Sure. <No>"
    assert [c["parsed"] for c in record.choices] == [None, False, True]
    assert record.choices[0]["error"] == "no <Yes>/<No>" and record.unparseable == 1
    assert [c["text"] for c in record.to_trace("s")["choices"]] == ["maybe", "Sure. <No>", "Fruit. <Yes>"]


def test_an_llm_that_takes_the_slot_itself_is_not_wrapped_again():
    async def main():
        install(CallLimiter(1))  # limit 1: a second, nested acquisition would deadlock
        llm = FakeLLM(["<Yes>", "<No>"], slot=True)
        first = await asyncio.wait_for(typed().run(llm, {"item": "a"}), timeout=5)
        second = await asyncio.wait_for(typed().run(llm, {"item": "b"}, tag="x"), timeout=5)
        return first, second

    first, second = asyncio.run(main())
    assert first.parsed is True and second.parsed is False


def test_old_style_llm_gets_the_slot_and_sample_index_plus_attempt():
    seen = []

    class Backend:
        identity = "b"

        async def chat(self, messages, params):
            seen.append(params.temperature)
            return ChatResult([Choice("???" if len(seen) == 1 else "<Yes>")], Usage(1, 1))

        async def close(self):
            return None

    record = asyncio.run(typed(retry_temperature=0.4).run(LLM(Backend()), {"item": "a"}))
    assert record.ok and record.calls == 2 and seen == [0.0, 0.4]


def test_schema_that_cannot_compile_raises_naming_the_agent():
    llm = FakeLLM([LLMError("json_schema cannot be compiled: unsupported keyword")])
    with pytest.raises(AgentSchemaError, match="agent 'typed' \\(typed\\): json_schema cannot be compiled"):
        asyncio.run(typed().run(llm, {"item": "a"}, mode="json"))
    other = asyncio.run(typed().run(FakeLLM([LLMError("server down")]), {"item": "a"}, mode="json"))
    assert not other.ok and other.error == "llm: server down" and other.error_kind == "llm"

    class NoSchema(BaseModel):
        model_config = {"arbitrary_types_allowed": True}
        value: object.__class__  # a type pydantic cannot express as JSON schema

    with pytest.raises(AgentSchemaError, match="agent 'typed': output model NoSchema has no JSON schema"):
        Agent("typed", FIXTURES, parse_text, output=NoSchema)


def test_a_json_reply_cut_by_max_tokens_keeps_what_it_holds():
    class Cut(FakeLLM):
        async def chat(self, messages, params=None, **kwargs):
            result = await super().chat(messages, params, **kwargs)
            result.choices[0].finish_reason = "length"
            return result

    class AnswerFirst(BaseModel):
        answer: Literal["Yes", "No"]
        reasoning: str = ""

        def to_result(self) -> bool:
            return self.answer == "Yes"

    agent = Agent("typed", FIXTURES, parse_text, output=AnswerFirst, max_attempts=1)
    record = asyncio.run(
        agent.run(Cut(['{"answer": "No", "reasoning": "A stone is not a fru']), {"item": "stone"}, mode="json")
    )
    assert record.ok and record.parsed is False and record.choices[0]["finish_reason"] == "length"
    # the same text that ended normally is malformed, and a cut before the required field stays unparseable
    assert not asyncio.run(agent.run(FakeLLM(['{"answer": "No", "reasoning": "A st']), {"item": "x"}, mode="json")).ok
    assert not asyncio.run(agent.run(Cut(['{"reasoning": "A st']), {"item": "x"}, mode="json")).ok


def test_a_call_can_narrow_the_output_model_while_the_prompt_keeps_the_declared_schema():
    class YesOnly(Verdict):
        answer: Literal["Yes"]

    agent = typed()
    llm = FakeLLM(['{"reasoning": "r", "answer": "No"}', '{"reasoning": "r", "answer": "Yes"}'])
    record = asyncio.run(agent.run(llm, {"item": "q"}, mode="json", output=YesOnly))
    assert record.ok and record.parsed is True and record.unparseable == 1  # "No" is outside the narrowed model
    assert [c["params"].json_schema for c in llm.calls] == [YesOnly.model_json_schema()] * 2
    assert agent.output_schema_text() in record.prompt[0]["content"]
    assert '"Yes"' in agent.output_schema_text() and '"No"' in agent.output_schema_text()
    assert agent.parse('{"reasoning": "r", "answer": "No"}', "json") is False  # the declared model still admits it
    text = asyncio.run(agent.run(FakeLLM(["<No>"]), {"item": "q"}, mode="text", output=YesOnly))
    assert text.ok and text.parsed is False  # text mode ignores the narrowed model


def test_the_schema_text_is_serialised_once_per_schema(monkeypatch):
    agent = typed()
    calls, dumps = [], json.dumps
    monkeypatch.setattr(json, "dumps", lambda *a, **k: calls.append(k.get("indent")) or dumps(*a, **k))
    first = [agent.render(output_mode="json", item=f"q{i}")[0]["content"] for i in range(3)]
    assert calls == [2] and first[0] == first[2] and agent.output_schema_text() in first[0]
    agent.json_schema = {"type": "object", "properties": {"only": {"type": "string"}}}  # as KGC experts do
    assert agent.output_schema_text() == dumps(agent.json_schema, indent=2) and calls == [2, 2]
    agent.json_schema = None
    assert agent.output_schema_text() == ""
