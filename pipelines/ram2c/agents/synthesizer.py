"""The synthesizer (template ``synthesizer``): context, the group's revisions -> the group's reply
(the E group's is R1, the chosen reply of a preference pair)."""

from __future__ import annotations

from typing import Any

from pipelines.ram2c.agents.agent import FOLDER, Ram2cAgent
from pipelines.ram2c.agents.reply import ReplyOut, parse_reply

NAME = "synthesizer"


def make_synthesizer(*, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    return Ram2cAgent(NAME, FOLDER, parse_reply, output=ReplyOut, max_tokens=max_tokens, **options)
