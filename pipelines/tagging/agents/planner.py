"""Task planner: knowledge definition -> sub-constraints, each typed semantic or numerical and
answerable with Yes/No about one question.

Text reply (one per line): ``<semantic> Does the question ...?`` / ``<numerical> Is ...?``.
The parser also takes numbered or bulleted lines, ``[numerical]`` / ``numerical:`` forms and the
Chinese type names 语义 / 数值; other lines are ignored. JSON reply: :class:`PlanOutput`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, create_model

from pipelines.agents import Agent, ParseError

LINE = re.compile(
    r"^\s*(?:[-*•]|\d+\s*[.)、:])?\s*[*_]*\s*[<\[(（【]?\s*(semantic|numerical|numeric|语义|数值)\s*[>\])）】]?"
    r"\s*[*_]*\s*[:：\-]?\s*(.+?)\s*$",
    re.I | re.M,
)
KINDS = {
    "semantic": "semantic",
    "numerical": "numerical",
    "numeric": "numerical",
    "语义": "semantic",
    "数值": "numerical",
}


@dataclass
class SubConstraint:
    kind: Literal["semantic", "numerical"]
    text: str


@dataclass
class Plan:
    constraints: list[SubConstraint] = field(default_factory=list)


class ConstraintOutput(BaseModel):
    kind: Literal["semantic", "numerical"]
    text: str = Field(min_length=4, max_length=120)


class PlanOutput(BaseModel):
    """JSON-mode reply of the planner."""

    constraints: list[ConstraintOutput] = Field(min_length=1, max_length=6)


def _plan(pairs: list[tuple[str, str]], max_constraints: int) -> Plan:
    seen, constraints = set(), []
    for kind, body in pairs:
        body = body.strip().strip("*_` ")
        if len(body) < 4 or body.lower() in seen:
            continue
        seen.add(body.lower())
        constraints.append(SubConstraint(kind, body))
    if not constraints:
        raise ParseError("no typed sub-constraint lines; expected lines like '<semantic> Does the question ...?'")
    return Plan(constraints[:max_constraints])


def parse_plan(text: str, max_constraints: int = 6) -> Plan:
    """Typed sub-constraints in reply order (duplicates dropped, at most ``max_constraints``)."""
    return _plan([(KINDS[m.group(1).lower()], m.group(2)) for m in LINE.finditer(text)], max_constraints)


def plan_from_output(output: PlanOutput, max_constraints: int = 6) -> Plan:
    """The same :class:`Plan` from a JSON-mode reply."""
    return _plan([(c.kind, c.text) for c in output.constraints], max_constraints)


def plan_output(max_constraints: int = 6) -> type[PlanOutput]:
    """:class:`PlanOutput` whose schema allows at most ``max_constraints`` sub-constraints."""
    if max_constraints == 6:
        return PlanOutput
    bounded = Field(min_length=1, max_length=max_constraints)
    return create_model("PlanOutput", __base__=PlanOutput, constraints=(list[ConstraintOutput], bounded))


def make_planner(max_constraints: int = 6, **options) -> Agent[Plan]:
    return Agent(
        "planner",
        Path(__file__).parent,
        lambda text: parse_plan(text, max_constraints),
        output=plan_output(max_constraints),
        from_output=lambda output: plan_from_output(output, max_constraints),
        **options,
    )
