"""The voter: its prompts, and parse_vote on clean, noisy,
JSON and garbage replies."""

import pytest

from pipelines.agents import ParseError
from pipelines.ram2c.agents.voter import parse_vote
from pipelines.ram2c.groups import group_experts
from tests.ram2c.agents.prompt_cases import AGENTS, TEXT, assert_matches_golden, golden_keys


@pytest.mark.parametrize("key", golden_keys("voter"))
def test_prompts_match_the_golden_file(key):
    assert_matches_golden(key)


def test_prompt_spelled_out():
    zh = TEXT["zh"]
    expert = group_experts("T", 1, "zh")[0].to_vars()
    voter = AGENTS["voter"].render(
        "zh",
        topic=zh["topic"],
        answer=zh["answer"],
        reply=zh["reply"],
        expert=expert,
        group_name=zh["group_name"],
        document=zh["passage"],
    )
    assert voter[0]["content"].startswith(
        "你是林老师，一位教了二十年小学语文的老师，最在意回复是否温暖、生动、孩子能听懂。你属于一个由语文教师组成的小组"
    )
    assert voter[1]["content"] == (
        "话题：玛拉为什么接过提灯？\n学生的回答：因为托宾受伤了，海上还有船。\n当前回复：想得真好！换作你会怎么做？\n\n"
        "文档：\n玛拉看看楼梯，又看看老人。\n\n这篇文档在“语言风格”方面有参考价值吗？是或否："
    )


@pytest.mark.parametrize(
    "text, vote",
    [
        ("yes", True),
        ("Yes, it shows a warm style.", True),
        ("no", False),
        ("No. It is not useful here.", False),
        ('{"vote": "yes", "reason": "style"}', True),
        ('```json\n{"vote": "no"}\n```', False),
        ("是，这篇文档有参考价值。", True),
        ("否", False),
        ("I think yes, although it is not about the book.", True),  # the earliest word counts
    ],
)
def test_parse_vote(text, vote):
    assert parse_vote(text) is vote


@pytest.mark.parametrize("text", ["maybe", "???", "The document talks about fish."])
def test_parse_vote_garbage(text):
    with pytest.raises(ParseError):
        parse_vote(text)
