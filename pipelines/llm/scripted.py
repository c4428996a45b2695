"""Scripted backend, for tests only: replies chosen by rules, never the default of any stage.

A rule is ``(regex, reply)``: the first rule whose regex matches the last user message (or the
whole conversation rendered as text) answers. ``reply`` may be a string or a function of the
messages. Every call is recorded in ``calls`` so tests can count them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Union

from pipelines.io import read_jsonl
from pipelines.llm.types import ChatResult, Choice, LLMError, Message, SamplingParams, Usage

Reply = Union[str, Callable[[list[Message]], str]]


class ScriptedBackend:
    """Answers from rules; ``delay_s`` simulates latency; ``calls`` records every request."""

    def __init__(self, rules: Sequence[tuple[str, Reply]], *, identity: str = "scripted", delay_s: float = 0.0):
        self.rules = [(re.compile(pattern, re.S), reply) for pattern, reply in rules]
        self.identity = identity
        self.delay_s = delay_s
        self.calls: list[list[Message]] = []

    @classmethod
    def from_file(cls, path: str | Path, *, identity: str = "scripted") -> ScriptedBackend:
        """Rules from JSONL lines ``{"match": regex, "reply": text}``."""
        return cls([(row["match"], row["reply"]) for row in read_jsonl(path)], identity=identity)

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResult:
        self.calls.append(messages)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        conversation = "\n".join(f"{m['role']}: {m['content']}" for m in messages)
        for pattern, reply in self.rules:
            if pattern.search(conversation):
                text = reply(messages) if callable(reply) else reply
                choices = [Choice(text=text) for _ in range(params.n)]
                usage = Usage(prompt_tokens=len(conversation.split()), completion_tokens=len(text.split()) * params.n)
                return ChatResult(choices=choices, usage=usage, model=self.identity)
        raise LLMError(f"scripted backend: no rule matches the conversation ending {conversation[-200:]!r}")

    async def close(self) -> None:
        return None
