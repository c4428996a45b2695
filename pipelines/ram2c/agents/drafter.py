"""The drafter (template ``drafter``): the pair's prompt messages -> the raw reply (R2, the rejected
reply of a preference pair). Its prompt is a conversation: system, earlier turns, the latest answer."""

from __future__ import annotations

from typing import Any

from pipelines.llm.types import Message
from pipelines.ram2c.agents.agent import FOLDER, Ram2cAgent
from pipelines.ram2c.agents.reply import ReplyOut, parse_reply

NAME = "drafter"


class ConversationAgent(Ram2cAgent):
    """An agent whose prompt is its system block, then ``history`` (earlier turns), then its user block.

    The drafter is one: its rendered messages are exactly the prompt of the preference pair.
    """

    def render(self, language: str | None = None, *, output_mode: str = "text", **vars: Any) -> list[Message]:
        history: list[Message] = list(vars.pop("history", []) or [])
        messages = super().render(language, output_mode=output_mode, **vars)
        return messages[:-1] + history + messages[-1:]


def make_drafter(*, max_tokens: int | None = None, **options: Any) -> ConversationAgent:
    return ConversationAgent(NAME, FOLDER, parse_reply, output=ReplyOut, max_tokens=max_tokens, **options)
