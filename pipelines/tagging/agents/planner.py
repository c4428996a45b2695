"""Task planner: knowledge definition -> sub-constraints, each typed semantic or numerical and
answerable with Yes/No about one question.

Reply format (one per line): ``<semantic> Does the question ...?`` / ``<numerical> Is ...?``.
The parser also takes numbered or bulleted lines, ``[numerical]`` / ``numerical:`` forms and the
Chinese type names 语义 / 数值; other lines are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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


def parse_plan(text: str, max_constraints: int = 6) -> Plan:
    """Typed sub-constraints in reply order (duplicates dropped, at most ``max_constraints``)."""
    seen, constraints = set(), []
    for match in LINE.finditer(text):
        body = match.group(2).strip().strip("*_` ")
        if len(body) < 4 or body.lower() in seen:
            continue
        seen.add(body.lower())
        constraints.append(SubConstraint(KINDS[match.group(1).lower()], body))
    if not constraints:
        raise ParseError("no typed sub-constraint lines; expected lines like '<semantic> Does the question ...?'")
    return Plan(constraints[:max_constraints])


def make_planner(max_constraints: int = 6, **options) -> Agent[Plan]:
    return Agent("planner", Path(__file__).parent, lambda text: parse_plan(text, max_constraints), **options)
