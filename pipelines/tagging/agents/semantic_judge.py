"""Semantic judge: (definition, question, solution, one semantic sub-constraint) -> reasoned Yes/No.

Text reply: short reasoning, then ``<Yes>`` or ``<No>`` (the last tag counts; ``<是>``/``<否>`` and
``Answer: Yes`` are accepted too). JSON reply: :class:`JudgmentOutput` (the answer first, so a
reply cut by ``max_tokens`` still parses). The same result type and parsers serve the single-LLM baseline.
Its two examples, a positive then a negative, are the template variables :func:`semantic_examples` makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from pipelines.agents import Agent
from pipelines.agents.parsing import find_verdict
from pipelines.tagging.agents.worked_examples import SemanticPair
from pipelines.tagging.data import TaggingExample


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


def semantic_examples(own: list[TaggingExample], shipped: SemanticPair | None, definition: str) -> list[dict[str, Any]]:
    """Template variables of the semantic judge's two examples, a positive then a negative. Each
    comes from the concept's own rows where one has that semantic label (a positive row is Yes; a
    negative row only with ``semantic_label`` 0 is No, since a negative may fail only a numerical
    requirement), else from ``shipped`` (a judged sub-constraint of ``semantic_examples.jsonl``,
    shown with its reasoning, after its definition and sub-constraint, said once for the pair)."""
    semantic = [(d, 1 if d.label == 1 else d.semantic_label) for d in own]
    out = []
    for wanted in (1, 0):
        row = next((d for d, label in semantic if label == wanted), None)
        if row is not None:
            shown = {"question": row.question, "label": wanted}
            if row.definition != definition:
                shown["definition"] = row.definition
            out.append(shown)
        elif shipped is not None:
            judged = shipped.positive if wanted else shipped.negative
            shown = {"question": judged.question, "label": judged.label, "reasoning": judged.reasoning}
            if not out or out[-1].get("constraint") != judged.constraint:  # said once for both of a pair
                shown.update(definition=judged.definition, constraint=judged.constraint)
            out.append(shown)
    return out
