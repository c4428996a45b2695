"""The reviser (template ``reviser``, role ``expert``): expert, context, its analysis -> that expert's
revision (``expert_call: split``; the joint call is :mod:`pipelines.ram2c.agents.analyst`)."""

from __future__ import annotations

from typing import Any

from pipelines.ram2c.agents.agent import FOLDER, Ram2cAgent
from pipelines.ram2c.agents.reply import ReplyOut, parse_reply

NAME = "reviser"


def make_reviser(*, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    return Ram2cAgent(NAME, FOLDER, parse_reply, role="expert", output=ReplyOut, max_tokens=max_tokens, **options)
