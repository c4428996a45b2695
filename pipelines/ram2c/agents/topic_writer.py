"""The topic writer (template ``topic_writer``): passage, level, direction -> one discussion question
(Q), ``{"question": ...}`` in json mode or plain text."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from pipelines.agents import ParseError
from pipelines.ram2c.agents.agent import FOLDER, Ram2cAgent
from pipelines.ram2c.agents.reply_text import clean_text, json_field

NAME = "topic_writer"

# The content rules of parse_question, in the schema the backend enforces (as a regular expression:
# xgrammar reads no minLength/maxLength beside a pattern): one line of 8-120 characters (inside
# max_tokens.topic_writer, 40) ending with "?" or "？", without "<", ">", braces, quotes or
# backslashes, so the example's placeholder, a JSON fragment or a long copy of the passage cannot be decoded.
QUESTION_CHARS = (8, 120)
QUESTION_PATTERN = rf'^[^<>{{}}"\\\n]{{{QUESTION_CHARS[0] - 1},{QUESTION_CHARS[1] - 1}}}[?？]$'


class QuestionOut(BaseModel):
    """json mode of the topic writer."""

    EXAMPLES: ClassVar[dict[str, str]] = {
        "en": '{"question": "<your question to the student, ending with ?>"}',
        "zh": '{"question": "<你向学生提的问题，以？结尾>"}',
    }
    question: str = Field(pattern=QUESTION_PATTERN)

    def to_result(self) -> str:
        return parse_question(self.question)


def parse_question(text: str) -> str:
    """One discussion question: the first line holding a question mark, cut after it. A reply with
    no question mark is not a question (a small model in json mode often copies the passage or the
    book line instead) and raises ParseError, so the agent re-asks."""
    value = json_field(text, "question")
    body = value if isinstance(value, str) else text
    lines = [clean_text(line) for line in body.strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise ParseError("no question in the reply")
    asked = [line for line in lines if "?" in line or "？" in line]
    question = (asked or lines)[0]
    if "?" not in question and "？" not in question:
        raise ParseError(f"not a question (no question mark): {question[:80]!r}")
    marks = [i for i in (question.find("?"), question.find("？")) if i >= 0]
    question = question[: min(marks) + 1]
    if len(question) < 8:
        raise ParseError(f"question too short: {question!r}")
    return question


def make_topic_writer(*, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    return Ram2cAgent(NAME, FOLDER, parse_question, output=QuestionOut, max_tokens=max_tokens, **options)
