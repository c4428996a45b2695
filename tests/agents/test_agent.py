"""The agent pattern: exact rendering, parsing, retries within a bound, errors kept in the record."""

import asyncio
from pathlib import Path

import jinja2
import pytest

from pipelines.agents import Agent, ParseError, PromptTemplate, TemplateError
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.llm.types import ChatResult, Choice, LLMError, Usage

FIXTURES = Path(__file__).parent / "fixtures"


def parse_yes_no(text: str) -> bool:
    if "<Yes>" in text:
        return True
    if "<No>" in text:
        return False
    raise ParseError("no <Yes>/<No>")


def make_agent(**kwargs) -> Agent[bool]:
    return Agent("echo", FIXTURES, parse_yes_no, **kwargs)


def test_render_is_exact_in_both_languages_and_system_text_is_shared():
    agent = make_agent()
    en = agent.render("en", item="apples", extras=["a", "b"])
    assert en == [
        {"role": "system", "content": "Shared rules: answer with <Yes> or <No>."},
        {"role": "user", "content": "Item: apples\n- a\n- b"},
    ]
    assert agent.render("zh", item="苹果") == [
        {"role": "system", "content": "共享规则：回答 <Yes> 或 <No>。"},
        {"role": "user", "content": "条目：苹果"},
    ]
    other = agent.render("en", item="pears", extras=[])
    assert other[0] == en[0]  # byte-identical shared prefix


def test_missing_variable_language_or_user_block_raise():
    agent = make_agent()
    with pytest.raises(jinja2.UndefinedError):
        agent.render("en", extras=[])
    with pytest.raises(TemplateError, match="no 'fr' template.*have: en, zh"):
        agent.render("fr", item="x")
    with pytest.raises(TemplateError, match="needs a 'user' block"):
        PromptTemplate(FIXTURES, "nouser").render("en")


def test_parse_rejects_empty_and_garbage():
    agent = make_agent()
    assert agent.parse("ok <Yes>") is True
    for bad in ("", "   \n", None, "%%%"):
        with pytest.raises(ParseError):
            agent.parse(bad)


def test_run_returns_a_trace_ready_record():
    backend = ScriptedBackend([("Item: apples", "Reasoning. <No>")])
    record = asyncio.run(make_agent().run(LLM(backend, role="judge"), {"item": "apples", "extras": []}))
    assert record.ok and record.parsed is False and record.error is None
    assert record.calls == 1 and record.reply == "Reasoning. <No>"
    row = record.to_trace("s1", constraint_index=2)
    assert row["sample_id"] == "s1" and row["agent"] == "echo" and row["role"] == "echo"
    assert row["prompt"][1]["content"] == "Item: apples" and row["parsed"] is False
    assert row["usage"]["completion_tokens"] == 2 and row["constraint_index"] == 2
    assert set(row) >= {"reply", "ok", "error", "cached"}


class SequenceBackend:
    """Returns the given replies in order and records each request's sample index and temperature."""

    identity = "sequence"

    def __init__(self, replies):
        self.replies = list(replies)
        self.seen = []

    async def chat(self, messages, params):
        self.seen.append(params.temperature)
        return ChatResult([Choice(self.replies.pop(0))], Usage(3, 1))

    async def close(self):
        return None


def test_bad_reply_is_re_asked_with_next_sample_index_and_retry_temperature(tmp_path):
    from pipelines.llm.cache import RequestCache

    backend = SequenceBackend(["garbage", "fine <Yes>"])
    cache = RequestCache(tmp_path / "c.sqlite")
    llm = LLM(backend, cache=cache)
    agent = make_agent(max_attempts=3, retry_temperature=0.8)
    record = asyncio.run(agent.run(llm, {"item": "x", "extras": []}, sample_index=5))
    assert record.ok and record.parsed is True
    assert record.calls == 2 and record.replies == ["garbage", "fine <Yes>"]
    assert record.usage == {"prompt_tokens": 6, "completion_tokens": 2}
    assert backend.seen == [0.0, 0.8]
    assert len(cache) == 2  # both attempts stored under distinct keys
    again = asyncio.run(agent.run(LLM(SequenceBackend([]), cache=cache), {"item": "x", "extras": []}, sample_index=5))
    assert again.ok and again.cached and again.calls == 2  # replayed without touching the backend


def test_retries_are_bounded_and_failure_is_recorded_not_raised():
    backend = SequenceBackend(["nope", "still nope", "never asked <Yes>"])
    record = asyncio.run(make_agent(max_attempts=2).run(LLM(backend), {"item": "x", "extras": []}))
    assert not record.ok and record.parsed is None
    assert record.calls == 2 and record.error.startswith("parse (attempt 2/2)")
    assert record.reply == "still nope"


def test_llm_error_is_recorded_not_raised():
    class Failing:
        identity = "failing"

        async def chat(self, messages, params):
            raise LLMError("server down")

        async def close(self):
            return None

    record = asyncio.run(make_agent().run(LLM(Failing()), {"item": "x", "extras": []}))
    assert not record.ok and record.error == "llm: server down" and record.calls == 1


def test_max_tokens_override_reaches_the_backend():
    seen = []

    class Capture(SequenceBackend):
        async def chat(self, messages, params):
            seen.append(params.max_tokens)
            return await super().chat(messages, params)

    asyncio.run(make_agent(max_tokens=17).run(LLM(Capture(["<Yes>"])), {"item": "x", "extras": []}))
    assert seen == [17]
