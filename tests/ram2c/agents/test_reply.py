"""parse_reply, the parser of the student, drafter, reviser and synthesizer: labels, quotes and JSON
around the reply are removed, in both languages."""

import pytest

from pipelines.ram2c.agents.reply import parse_reply


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
