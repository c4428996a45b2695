"""The ballot: its prompts, its schema of one required verdict per document, and parse_ballot on
JSON objects and lists, numbered lines, bare verdicts and replies without a verdict."""

import pytest

from pipelines.agents import ParseError
from pipelines.ram2c.agents.ballot import parse_ballot
from pipelines.ram2c.groups import group_experts
from tests.ram2c.agents.prompt_cases import AGENTS, TEXT, assert_matches_golden, golden_keys


@pytest.mark.parametrize("key", golden_keys("ballot"))
def test_prompts_match_the_golden_file(key):
    assert_matches_golden(key)


def test_ballot_prompt_spelled_out():
    expert = group_experts("E", 1, "en")[0].to_vars()
    t = TEXT["en"]
    messages = AGENTS["ballot:2"].render(
        "en",
        output_mode="json",
        topic=t["topic"],
        answer=t["answer"],
        reply=t["reply"],
        expert=expert,
        group_name="safety and ethics experts",
        documents=["Doc one.", "Doc two."],
    )
    assert messages[0]["content"] == (
        "You are Ms. Reyes, a child-safety officer who removes anything harmful, frightening or disrespectful and "
        "handles dark story events gently. You belong to a group of safety and ethics experts who improve a "
        "teacher's reply to a student. The group is reviewing retrieved documents before revising the reply. "
        "Judge every document along your own dimension, safety: could it help improve the reply to this student? "
        "A document can be useful by its style, its method or an example even when its topic differs. "
        'Answer "yes" or "no" for each document, by its number.\n\n'
        "Reply with JSON only, in this form:\n"
        '{"1": "<yes or no>", "2": "<yes or no>"}'
    )
    assert messages[1]["content"] == (
        "Topic: Why did Mara take the lantern?\n"
        "Student's answer: Because Tobin was hurt and ships were out there.\n"
        "Current reply: Good thinking! What would you do?\n\n"
        "Document 1:\nDoc one.\n\n"
        "Document 2:\nDoc two.\n\n"
        "Is each document a useful reference for safety? yes or no for each number:"
    )
    zh = TEXT["zh"]
    messages = AGENTS["ballot:2"].render(
        "zh",
        output_mode="json",
        topic=zh["topic"],
        answer=zh["answer"],
        reply=zh["reply"],
        expert=group_experts("E", 1, "zh")[0].to_vars(),
        group_name="安全与伦理专家",
        documents=["文档甲。", "文档乙。"],
    )
    assert messages[0]["content"].endswith(
        "按编号对每一篇回答“是”或“否”。\n\n只用 JSON 回复，格式如下：\n"
        '{"1": "<yes 或 no>", "2": "<yes 或 no>"}'
    )
    assert messages[1]["content"] == (
        "话题：玛拉为什么接过提灯？\n学生的回答：因为托宾受伤了，海上还有船。\n当前回复：想得真好！换作你会怎么做？\n\n"
        "文档1：\n文档甲。\n\n文档2：\n文档乙。\n\n"
        "每一篇文档在“安全”方面有参考价值吗？请按编号回答是或否："
    )


@pytest.mark.parametrize(
    "text, votes",
    [
        ('{"1": "yes", "2": "no", "3": "yes"}', [True, False, True]),
        ('```json\n{"1": "no", "2": "no", "3": "yes"}\n```', [False, False, True]),
        ('["yes", "no", "no"]', [True, False, False]),
        ("1: yes\n2: no\n3: yes", [True, False, True]),
        ("Document 1 - No. Document 2: yes. Document 3: no, off topic.", [False, True, False]),
        ("**1**: yes\n**2**: no\n**3**: no", [True, False, False]),
        ("文档1：是的\n文档2：否\n文档3：是", [True, False, True]),
        ("Yes.\nNo.\nYes.", [True, False, True]),  # bare verdicts, exactly one per document
        ('{"1": "yes"}', [True, None, None]),  # skipped documents: None (counted as no)
        ("2: yes", [None, True, None]),
        ('{"1": "yes", "7": "no", "2": "maybe"}', [True, None, None]),  # out of range and non-verdicts ignored
    ],
)
def test_parse_ballot(text, votes):
    assert parse_ballot(text, 3) == votes


@pytest.mark.parametrize("text", ["", "maybe", "Document 1 is not useful.", "yes, no", "I cannot say"])
def test_parse_ballot_rejects_replies_without_a_verdict(text):
    with pytest.raises(ParseError):
        parse_ballot(text, 3)


def test_ballot_agents_have_one_required_verdict_per_document():
    ballot = AGENTS["ballot:2"]
    assert ballot.name == "ballot" and ballot.role == "expert"
    schema = ballot.json_schema
    assert schema["required"] == ["1", "2"] and schema["additionalProperties"] is False
    assert schema["properties"]["2"]["enum"] == ["yes", "no"]
    assert ballot.parse('{"1": "no", "2": "yes"}', "json") == [False, True]
    assert ballot.parse("1: no\n2: yes", "json") == [False, True]  # not JSON: the text parser decides
    assert AGENTS["ballot:3"].parse('{"1": "yes", "2": "no"}', "json") == [True, False, None]  # via the text parser
    with pytest.raises(ParseError):
        ballot.parse('{"1": "perhaps"}', "json")
    assert sorted(k for k in AGENTS if k.startswith("ballot:")) == [f"ballot:{n}" for n in range(1, 6)]
