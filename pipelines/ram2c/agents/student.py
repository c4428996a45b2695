"""The student (template ``student``): persona, topic, teacher reply -> the student's answer (A)."""

from __future__ import annotations

from typing import Any

from pipelines.ram2c.agents.agent import FOLDER, Ram2cAgent
from pipelines.ram2c.agents.reply import ReplyOut, parse_reply

NAME = "student"


def make_student(*, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    return Ram2cAgent(NAME, FOLDER, parse_reply, output=ReplyOut, max_tokens=max_tokens, **options)
