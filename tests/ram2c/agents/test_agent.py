"""The RAM2C agent: json mode validates the output model and falls back to the text parser when a
reply is not valid JSON; its prompt shows the model's one-line example, the backend gets the schema."""

import pytest

from pipelines.agents import ParseError
from pipelines.llm.types import SamplingParams
from tests.ram2c.agents.prompt_cases import AGENTS


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
    assert AGENTS["voter"].params(SamplingParams(), 0, "json").json_schema == AGENTS["voter"].json_schema
