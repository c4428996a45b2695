"""Semantic judge: (definition, question, solution, one semantic sub-constraint) -> reasoned Yes/No.

Text reply: short reasoning, then ``<Yes>`` or ``<No>`` (the last tag counts; ``<是>``/``<否>`` and
``Answer: Yes`` are accepted too). JSON reply: :class:`JudgmentOutput` (the answer first, so a
reply cut by ``max_tokens`` still parses). The same result type and parsers serve the single-LLM baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from pipelines.agents import Agent
from pipelines.agents.parsing import find_verdict


@dataclass
class Judgment:
    verdict: bool
    reasoning: str


class JudgmentOutput(BaseModel):
    """JSON-mode reply of a judge: the answer, then a short reason."""

    answer: Literal["Yes", "No"]
    reasoning: str = Field("", max_length=60)

    def to_result(self) -> Judgment:
        return Judgment(self.answer == "Yes", self.reasoning.strip())


def parse_judgment(text: str) -> Judgment:
    verdict, reasoning = find_verdict(text)
    return Judgment(verdict, reasoning)


def make_semantic_judge(**options) -> Agent[Judgment]:
    return Agent("semantic_judge", Path(__file__).parent, parse_judgment, output=JudgmentOutput, **options)
