"""Query rewriting: the exact rendered prompts, the parser on clean/noisy/empty/garbage replies, and
the call through the LLM client with its request cache."""

import asyncio
from pathlib import Path

from pipelines.llm.cache import RequestCache
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.retrieval.rewrite import QueryRewriter, parse_rewrites, render_rewrite_prompt


def test_rendered_prompt_english_exact():
    assert render_rewrite_prompt("How to motivate students?", 2) == [
        {
            "role": "user",
            "content": "You help a team of tutoring experts search a knowledge base. Rewrite the search query below "
            "in 2 different ways so that together the rewrites find more relevant passages: use synonyms, name the "
            "underlying concept, or ask the question from another angle. Keep each rewrite short and in English.\n\n"
            "Query: How to motivate students?\n\n"
            'Answer with exactly 2 lines, one rewrite per line, numbered "1.", "2.", and nothing else.',
        }
    ]


def test_rendered_prompt_chinese_exact_and_forced_language():
    assert render_rewrite_prompt(" 如何激励学生？ ", 3)[0]["content"] == (
        "你在帮助一组辅导专家检索知识库。请把下面的检索问题改写成 3 种不同的说法，"
        "使这些改写合在一起能找到更多相关段落："
        "可以使用同义词、点明背后的概念，或换一个角度提问。每条改写要简短，使用中文。\n\n问题：如何激励学生？\n\n"
        "请只输出 3 行，每行一条改写，用“1.”、“2.”编号，不要输出其他内容。"
    )
    assert render_rewrite_prompt("如何激励学生", 1, "en")[0]["content"].startswith("You help")


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


def test_rewriter_calls_llm_once_thanks_to_cache(tmp_path: Path):
    backend = ScriptedBackend([(r"Query: ", "1. alpha query\n2. beta query")], identity="scripted-rw")
    cache = RequestCache(tmp_path / "cache.sqlite")
    rewriter = QueryRewriter(LLM(backend, role="query_rewriter", cache=cache), 2)
    assert asyncio.run(rewriter.rewrite("original")) == ["alpha query", "beta query"]
    assert asyncio.run(rewriter.rewrite("original")) == ["alpha query", "beta query"]
    assert len(backend.calls) == 1 and rewriter.failures == 0
    cache.close()


def test_rewriter_failure_and_garbage_give_no_rewrites():
    rewriter = QueryRewriter(LLM(ScriptedBackend([(r"garbage", "%%%%")])), 2)
    assert asyncio.run(rewriter.rewrite("no rule matches")) == []  # LLMError from the backend
    assert asyncio.run(rewriter.rewrite("garbage please")) == []
    assert rewriter.failures == 2
