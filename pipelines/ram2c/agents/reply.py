"""The reply addressed to the student (a teacher's or the student's): the answer of the student,
drafter, reviser and synthesizer roles, ``{"reply": ...}`` in json mode or plain text."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from pipelines.ram2c.agents.reply_text import text_of


class ReplyOut(BaseModel):
    """json mode of the student, drafter, reviser and synthesizer."""

    EXAMPLES: ClassVar[dict[str, str]] = {"en": '{"reply": "<your reply>"}', "zh": '{"reply": "<你的回复>"}'}
    reply: str = Field(min_length=1, max_length=2000)

    def to_result(self) -> str:
        return parse_reply(self.reply)


def parse_reply(text: str) -> str:
    """A reply addressed to the student (teacher's or student's); ParseError when nothing is left."""
    return text_of(text, "reply")
