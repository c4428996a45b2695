"""Query rewriting: the exact rendered prompts, the parser on clean/noisy/empty/garbage replies, and
the call through the LLM client with its request cache."""

import asyncio
from pathlib import Path

import pytest

from pipelines.llm.cache import RequestCache
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.retrieval.rewrite import QueryRewriter, parse_rewrites, render_rewrite_prompt

SYSTEM_EN = (
    "You help a team of tutoring experts search a knowledge base. Rewrite the search query you are given in 2 "
    "different ways so that together the rewrites find more relevant passages: use synonyms, name the underlying "
    "concept, or ask the question from another angle. Keep each rewrite short and in English.\n"
)


def test_rendered_prompt_english_exact():
    assert render_rewrite_prompt("How to motivate students?", 2) == [
        {
            "role": "system",
            "content": SYSTEM_EN
            + 'Answer with exactly 2 lines, one rewrite per line, numbered "1.", "2.", and nothing else.',
        },
        {"role": "user", "content": "Query: How to motivate students?"},
    ]


def test_rendered_prompt_chinese_exact_and_forced_language():
    assert render_rewrite_prompt(" 如何激励学生？ ", 3) == [
        {
            "role": "system",
            "content": "你在帮助一组辅导专家检索知识库。请把给你的检索问题改写成 3 种不同的说法，"
            "使这些改写合在一起能找到更多相关段落："
            "可以使用同义词、点明背后的概念，或换一个角度提问。每条改写要简短，使用中文。\n"
            "请只输出 3 行，每行一条改写，用“1.”、“2.”编号，不要输出其他内容。",
        },
        {"role": "user", "content": "问题：如何激励学生？"},
    ]
    assert render_rewrite_prompt("如何激励学生", 1, "en")[0]["content"].startswith("You help")


def test_shared_instructions_are_byte_identical_across_queries_and_json_mode_names_the_schema():
    first, second = render_rewrite_prompt("q one", 2), render_rewrite_prompt("another query", 2)
    assert first[0] == second[0] and first[1] != second[1]
    agent = QueryRewriter(LLM(ScriptedBackend([])), 2).agent
    json_mode = agent.render("en", query="q", n=2, output_mode="json", output_schema='{"type": "object"}')
    assert (
        json_mode[0]["content"]
        == SYSTEM_EN + 'Reply with JSON matching this schema, with exactly 2 rewrites:\n{"type": "object"}'
    )


def test_parse_clean_noisy_empty_garbage():
    assert parse_rewrites("1. Ways to encourage learners\n2. Student motivation strategies", 2) == [
        "Ways to encourage learners",
        "Student motivation strategies",
    ]
    noisy = (
        'Sure! Here are the rewrites:\n\n1) "Ways to encourage learners"\n'
        "- how to motivate students?\n* Boosting drive\n3. extra"
    )
    assert parse_rewrites(noisy, 2, "How to motivate students?") == ["Ways to encourage learners", "Boosting drive"]
    assert parse_rewrites("（1）如何激励学生\n2、激发学习动机的方法", 2) == ["如何激励学生", "激发学习动机的方法"]
    assert parse_rewrites('["first query", "second query", "third"]', 2) == ["first query", "second query"]
    assert parse_rewrites("", 2) == [] and parse_rewrites(None, 2) == [] and parse_rewrites("   \n", 2) == []
    assert parse_rewrites("!!!! ### 12345\n{}\n....", 2) == []
    assert parse_rewrites('{"rewrites": ["a json one", "another"]}', 2) == ["a json one", "another"]


def test_agent_parser_raises_on_unusable_replies():
    from pipelines.agents.agent import ParseError
    from pipelines.retrieval.rewrite import parse_rewrite_reply

    assert parse_rewrite_reply("1. alpha\n2. beta\n3. gamma", 2) == ["alpha", "beta"]
    for reply in ("%%%%", "Here you go:", "[]"):
        with pytest.raises(ParseError, match="no usable rewrite"):
            parse_rewrite_reply(reply, 2)


def test_rewriter_calls_llm_once_thanks_to_cache(tmp_path: Path):
    backend = ScriptedBackend([(r"Query: ", "1. alpha query\n2. beta query")], identity="scripted-rw")
    cache = RequestCache(tmp_path / "cache.sqlite")
    rewriter = QueryRewriter(LLM(backend, role="query_rewriter", cache=cache), 2)
    assert asyncio.run(rewriter.rewrite("original")) == ["alpha query", "beta query"]
    assert asyncio.run(rewriter.rewrite("original")) == ["alpha query", "beta query"]
    assert len(backend.calls) == 1 and rewriter.failures == 0
    cache.close()


def test_rewriter_failure_and_garbage_give_no_rewrites():
    backend = ScriptedBackend([(r"garbage", "%%%%")])
    rewriter = QueryRewriter(LLM(backend), 2)
    assert asyncio.run(rewriter.rewrite("no rule matches")) == []  # LLMError from the backend
    outcome = asyncio.run(rewriter.run("garbage please"))
    assert outcome.rewrites == [] and rewriter.failures == 2
    assert not outcome.record.ok and outcome.record.calls == 2 and "no usable rewrite" in outcome.record.error
    assert outcome.record.replies == ["%%%%", "%%%%"]


def test_unusable_reply_is_asked_again_and_the_record_keeps_both_replies():
    replies = iter(["Sure:", "1. second try works\n2. and twice"])
    temperatures = []

    class Recording(ScriptedBackend):
        async def chat(self, messages, params):
            temperatures.append(params.temperature)
            return await super().chat(messages, params)

    rewriter = QueryRewriter(LLM(Recording([(r"Query: again", lambda _: next(replies))])), 2)
    outcome = asyncio.run(rewriter.run("again"))
    assert outcome.rewrites == ["second try works", "and twice"] and rewriter.failures == 0
    assert outcome.record.ok and outcome.record.calls == 2 and outcome.record.replies[0] == "Sure:"
    assert temperatures == [0.0, 0.7]  # the re-ask samples instead of repeating the greedy reply
