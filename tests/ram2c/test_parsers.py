"""Parsers of the RAM2C agents on clean, noisy, JSON, empty and garbage replies; json mode falls
back to the text parser when a reply is not valid JSON."""

import pytest

from pipelines.agents import ParseError
from pipelines.ram2c.agents import make_agents
from pipelines.ram2c.agents.replies import (
    parse_analysed_revision,
    parse_analysis,
    parse_ballot,
    parse_question,
    parse_reply,
    parse_vote,
)

AGENTS = make_agents()


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


@pytest.mark.parametrize(
    "text, reply",
    [
        ("Great job! Why do you think so?", "Great job! Why do you think so?"),
        ("Teacher: Great job! Why?", "Great job! Why?"),
        ('"Great job! Why?"', "Great job! Why?"),
        ("**Final reply:** Great job!", "Great job!"),
        ('{"reply": "Great job!"}', "Great job!"),
        ("最终回复：你说得真好！为什么呢？", "你说得真好！为什么呢？"),
    ],
)
def test_parse_reply(text, reply):
    assert parse_reply(text) == reply


@pytest.mark.parametrize("text", ["", "   ", "Teacher:", '""'])
def test_parse_reply_empty(text):
    with pytest.raises(ParseError):
        AGENTS["reviser"].parse(text)


@pytest.mark.parametrize(
    "text, question",
    [
        ("Why did Mara take the lantern?", "Why did Mara take the lantern?"),
        ("Here is a question:\nQuestion: Why did Mara climb the stair? It was dark.", "Why did Mara climb the stair?"),
        ('{"question": "How did Tobin feel?"}', "How did Tobin feel?"),
        ("玛拉为什么接过提灯？请说明理由。", "玛拉为什么接过提灯？"),
        ("What did Mara see？Why?", "What did Mara see？"),  # cut after the first mark, either script
    ],
)
def test_parse_question(text, question):
    assert parse_question(text) == question


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Why?",
        "\n\n",
        "Describe how the storm changed Mara.",  # not a question
        '{"question": "The Lighthouse Apprentice, chapter 1"}',  # the book line copied (seen with SmolLM2)
        '{"question": "The climb felt endless. Rain hammered the tower and"}',  # the passage copied
    ],
)
def test_parse_question_rejects_empty_and_too_short(text):
    with pytest.raises(ParseError):
        AGENTS["topic_writer"].parse(text)


def test_parse_analysis():
    assert parse_analysis("Analysis: The student is curious.") == "The student is curious."
    assert parse_analysis('{"analysis": "学生很好奇。"}') == "学生很好奇。"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Analysis: He is curious.\nReply: Good! Why?", ("He is curious.", "Good! Why?")),
        (
            "**Analysis:** The answer is short.\nIt lacks evidence.\n\n**Reply:** Nice! What shows it?",
            ("The answer is short.\nIt lacks evidence.", "Nice! What shows it?"),
        ),
        ('{"analysis": "He is curious.", "reply": "Teacher: Good! Why?"}', ("He is curious.", "Good! Why?")),
        ('Sure.\n```json\n{"analysis": "x y", "reply": "Why?"}\n```', ("x y", "Why?")),
        ("分析：学生很好奇。\n回复：说得好！为什么？", ("学生很好奇。", "说得好！为什么？")),
        ("He is curious.\nRevised reply: Good! Why?", ("He is curious.", "Good! Why?")),
    ],
)
def test_parse_analysed_revision(text, expected):
    assert parse_analysed_revision(text) == {"analysis": expected[0], "reply": expected[1]}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "Good! Why?",  # a revision without its analysis
        "Analysis: He is curious.",  # an analysis without the revision
        "Analysis: He is curious.\nReply:   ",
        "Reply: Good! Why?",  # empty analysis
        '{"analysis": "x"}',
        '{"analysis": "", "reply": "Why?"}',
        "\x00\x01 ### !!!",
    ],
)
def test_parse_analysed_revision_rejects_a_missing_or_empty_part(text):
    with pytest.raises(ParseError):
        parse_analysed_revision(text)


def test_analysed_revision_json_mode_validates_both_fields_and_falls_back_to_text():
    agent = AGENTS["analyst_reviser"]
    assert agent.parse('{"analysis": "He is curious.", "reply": "Why?"}', "json") == {
        "analysis": "He is curious.",
        "reply": "Why?",
    }
    assert agent.parse("Analysis: a.\nReply: Why?", "json") == {"analysis": "a.", "reply": "Why?"}
    with pytest.raises(ParseError):
        agent.parse('{"analysis": "a", "reply": ""}', "json")
    schema = agent.json_schema
    assert list(schema["properties"]) == ["analysis", "reply"]  # decoded in this order: analysis first
    assert schema["required"] == ["analysis", "reply"]


def test_json_mode_validates_and_falls_back_to_text():
    voter = AGENTS["voter"]
    assert voter.parse('{"vote": "yes", "reason": "warm"}', "json") is True
    assert voter.parse("no, not useful", "json") is False  # not JSON: the text parser decides
    with pytest.raises(ParseError):
        voter.parse('{"vote": "perhaps"}', "json")
    assert AGENTS["synthesizer"].parse('{"reply": "Teacher: Well done!"}', "json") == "Well done!"
    assert AGENTS["topic_writer"].parse('{"question": "Why did he sail? Because."}', "json") == "Why did he sail?"


def test_json_mode_prompt_shows_a_one_line_example_and_the_backend_gets_the_schema():
    messages = AGENTS["voter"].render(
        "en",
        output_mode="json",
        expert={"name": "A", "profile": "p", "dimension": "d"},
        group_name="g",
        topic="t",
        answer="a",
        reply="r",
        document="doc",
    )
    system = messages[0]["content"]
    assert system.endswith('\n\nReply with JSON only, in this form:\n{"vote": "<yes or no>"}')
    assert "properties" not in system and "title" not in system  # no pretty schema in the prompt
    zh = AGENTS["synthesizer"].render(
        "zh",
        output_mode="json",
        topic="t",
        answer="a",
        revisions=["x"],
        student={
            "grade": "五年级",
            "traits": ["害羞", "好奇"],
            "interest": "足球",
            "reading_level": "阅读水平与年级相当",
        },
    )
    assert zh[0]["content"].endswith('\n\n只用 JSON 回复，格式如下：\n{"reply": "<你的回复>"}')
    assert AGENTS["voter"].json_schema["properties"]["vote"]["enum"] == ["yes", "no"]
    from pipelines.llm.types import SamplingParams

    assert AGENTS["voter"].params(SamplingParams(), 0, "json").json_schema == AGENTS["voter"].json_schema


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
