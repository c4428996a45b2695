"""The voter (template ``voter``, role ``expert``): expert, context, one document -> yes / no (group
reflection, one call per document; the one-call alternative is :mod:`pipelines.ram2c.agents.ballot`)."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from pipelines.agents import ParseError
from pipelines.ram2c.agents.agent import FOLDER, Ram2cAgent
from pipelines.ram2c.agents.reply_text import json_field

NAME = "voter"


class VoteOut(BaseModel):
    """json mode of a group-reflection vote on one document."""

    EXAMPLES: ClassVar[dict[str, str]] = {"en": '{"vote": "<yes or no>"}', "zh": '{"vote": "<yes 或 no>"}'}
    vote: Literal["yes", "no"]
    reason: str = Field("", max_length=300)

    def to_result(self) -> bool:
        return self.vote == "yes"


YES = re.compile(r"\b(yes|useful|accept)\b|是|有参考价值|有用", re.I)
NO = re.compile(r"\b(no|not|reject)\b|否|没有|无", re.I)


def parse_vote(text: str) -> bool:
    """True for yes, False for no: the JSON ``vote`` field, else the earliest yes/no word."""
    value = json_field(text, "vote")
    if isinstance(value, str) and value.strip().lower() in ("yes", "no", "是", "否"):
        return value.strip().lower() in ("yes", "是")
    yes, no = YES.search(text), NO.search(text)
    if yes is None and no is None:
        raise ParseError("no yes/no vote in the reply")
    if no is None:
        return True
    if yes is None:
        return False
    return yes.start() < no.start()


def make_voter(*, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    return Ram2cAgent(NAME, FOLDER, parse_vote, role="expert", output=VoteOut, max_tokens=max_tokens, **options)
