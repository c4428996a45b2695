"""Semantic judge: (definition, question, solution, one semantic sub-constraint) -> reasoned Yes/No.

Reply: short reasoning, then ``<Yes>`` or ``<No>`` (the last tag counts; ``<是>``/``<否>`` and
``Answer: Yes`` are accepted too). The same result type and parser serve the single-LLM baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipelines.agents import Agent
from pipelines.tagging.parsing import find_verdict


@dataclass
class Judgment:
    verdict: bool
    reasoning: str


def parse_judgment(text: str) -> Judgment:
    verdict, reasoning = find_verdict(text)
    return Judgment(verdict, reasoning)


def make_semantic_judge(**options) -> Agent[Judgment]:
    return Agent("semantic_judge", Path(__file__).parent, parse_judgment, **options)
