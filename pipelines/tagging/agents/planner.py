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


EXAMPLES_FILE = Path(__file__).parent / "planner_examples.jsonl"


@dataclass
class PlannerExample:
    language: str
    definition: str
    constraints: list[tuple[str, str]]


def load_planner_examples(path: Path | str = EXAMPLES_FILE) -> list[PlannerExample]:
    """The worked (definition -> typed sub-constraints) examples the planner is shown, both languages."""
    import json

    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [PlannerExample(r["language"], r["definition"], [tuple(c) for c in r["constraints"]]) for r in rows]


class PlannerExamples:
    """``for_definition(definition, language)`` -> ``k`` worked examples of that language, chosen by
    the demonstrations' strategy: ``random`` (seeded, the same for every definition, so the
    planner's system prompt stays byte-identical) or ``nearest`` (closest definitions by
    ``embed(list[str]) -> array``)."""

    def __init__(self, examples=None, *, k: int = 2, strategy: str = "random", seed: int = 0, embed=None):
        import random

        self.k, self.strategy, self.embed = k, strategy, embed
        self.by_language: dict[str, list[PlannerExample]] = {}
        for example in examples if examples is not None else load_planner_examples():
            self.by_language.setdefault(example.language, []).append(example)
        rng = random.Random(seed)
        self.fixed = {lang: rng.sample(rows, min(k, len(rows))) for lang, rows in sorted(self.by_language.items())}

    def for_definition(self, definition: str, language: str) -> list[PlannerExample]:
        rows = self.by_language.get(language) or self.by_language.get("en", [])
        if self.strategy != "nearest" or self.embed is None or not rows:
            return self.fixed.get(language) or self.fixed.get("en", [])
        import numpy as np

        vectors = np.asarray(self.embed([definition] + [r.definition for r in rows]))
        norms = np.linalg.norm(vectors, axis=1) + 1e-9
        scores = vectors[1:] @ vectors[0] / (norms[1:] * norms[0])
        return [rows[i] for i in np.argsort(-scores, kind="stable")[: self.k]]
