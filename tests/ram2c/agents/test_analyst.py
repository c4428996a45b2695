"""The analyst and the analyst_reviser: their prompts, parse_analysis, and parse_analysed_revision
on JSON and labelled text, refusing a revision without its analysis or an analysis without its
revision; json mode validates both fields and falls back to the text parser."""

import pytest

from pipelines.agents import ParseError
from pipelines.ram2c.agents.analyst import parse_analysed_revision, parse_analysis
from tests.ram2c.agents.prompt_cases import AGENTS, assert_matches_golden, golden_keys


@pytest.mark.parametrize("key", golden_keys("analyst", "analyst_reviser"))
def test_prompts_match_the_golden_file(key):
    assert_matches_golden(key)


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
