"""Task planner: knowledge definition -> sub-constraints, each typed semantic or numerical and
answerable with Yes/No about one question.

Text reply (one per line): ``<semantic> Does the question ...?`` / ``<numerical> Is ...?``.
The parser also takes numbered or bulleted lines, ``[numerical]`` / ``numerical:`` forms and the
Chinese type names 语义 / 数值; other lines (headings such as ``Numerical constraints:``, prose) are
ignored. Sub-constraints past ``max_constraints`` are cut and counted (``Plan.truncated``).
JSON reply: :class:`PlanOutput`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, create_model

from pipelines.agents import Agent, ParseError
from pipelines.agents.reply_bounds import trimmed_text

_KIND = r"(semantic|numerical|numeric|语义|数值)"
LINE = re.compile(
    # a typed line: the type in brackets (<semantic>, [numerical], 【数值】) or followed by a colon or
    # dash ("numerical: ...", "Semantic - ..."); a heading ("Numerical constraints:") or a word that
    # starts with a type name ("Semantically, ...") is not one
    r"^[ \t]*(?:[-*•]|\d+[ \t]*[.)、:])?[ \t]*[*_]*[ \t]*"
    rf"(?:[<\[(（【][ \t]*{_KIND}[ \t]*[>\])）】]|{_KIND}(?![A-Za-z\u4e00-\u9fff])[ \t]*[*_]*[ \t]*[:：\-])"
    r"[ \t]*[*_]*[ \t]*[:：\-]?[ \t]*(.+?)[ \t]*$",
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
    """Sub-constraints in reply order; ``truncated`` counts typed ones cut by ``max_constraints``."""

    constraints: list[SubConstraint] = field(default_factory=list)
    truncated: int = 0


class ConstraintOutput(BaseModel):
    kind: Literal["semantic", "numerical"]
    text: str = Field(pattern=trimmed_text(4, 72))  # never shorter than 4 characters once stripped


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
    return Plan(constraints[:max_constraints], truncated=max(0, len(constraints) - max_constraints))


def parse_plan(text: str, max_constraints: int = 6) -> Plan:
    """Typed sub-constraints in reply order (duplicates dropped, at most ``max_constraints``)."""
    pairs = [(KINDS[(m.group(1) or m.group(2)).lower()], m.group(3)) for m in LINE.finditer(text)]
    return _plan(pairs, max_constraints)


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
