"""The worked examples shipped beside the agents, and how a prompt's examples are chosen.

- ``planner_examples.jsonl``: definitions split into typed sub-constraints, the planner's few
  shots (``{"language", "definition", "constraints": [[kind, text], ...]}``).
- ``semantic_examples.jsonl``: for the semantic sub-constraint of each of those definitions, one
  question that meets it and one that does not, with the judgment (``{"language", "definition",
  "constraint", "question", "label", "reasoning"}``). Written by the project: the negative keeps
  the positive's numbers and changes only what the question asks, so it fails the semantic
  sub-constraint alone (``tests/tagging/agents/test_worked_examples.py`` checks the numbers and the pairs).

:class:`ExampleChooser` picks ``k`` items per language for a definition: ``random`` (seeded, the
same for every definition, so a prompt stays byte-identical) or ``nearest`` (the closest
definitions by ``embed(list[str]) -> array``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

HERE = Path(__file__).parent
PLANNER_FILE = HERE / "planner_examples.jsonl"
SEMANTIC_FILE = HERE / "semantic_examples.jsonl"
T = TypeVar("T")


@dataclass
class PlannerExample:
    language: str
    definition: str
    constraints: list[tuple[str, str]]


@dataclass
class SemanticExample:
    """One judged (sub-constraint, question) pair, shown to the semantic judge with its definition."""

    language: str
    definition: str
    constraint: str
    question: str
    label: int
    reasoning: str


@dataclass
class SemanticPair:
    """A positive and a negative judgment of one sub-constraint."""

    language: str
    definition: str
    positive: SemanticExample
    negative: SemanticExample


def _rows(path: Path | str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def load_planner_examples(path: Path | str = PLANNER_FILE) -> list[PlannerExample]:
    """The worked (definition -> typed sub-constraints) examples the planner is shown, both languages."""
    return [PlannerExample(r["language"], r["definition"], [tuple(c) for c in r["constraints"]]) for r in _rows(path)]


def load_semantic_pairs(path: Path | str = SEMANTIC_FILE) -> list[SemanticPair]:
    """The file's judgments as (positive, negative) pairs of one sub-constraint, in file order;
    ValueError naming the sub-constraint when one lacks either judgment."""
    groups: dict[tuple[str, str, str], dict[int, SemanticExample]] = {}
    for row in _rows(path):
        example = SemanticExample(**{k: row[k] for k in SemanticExample.__dataclass_fields__})
        groups.setdefault((example.language, example.definition, example.constraint), {})[example.label] = example
    pairs = []
    for (language, definition, constraint), by_label in groups.items():
        if set(by_label) != {0, 1}:
            raise ValueError(f"{path}: sub-constraint {constraint!r} needs one positive and one negative judgment")
        pairs.append(SemanticPair(language, definition, by_label[1], by_label[0]))
    return pairs


class ExampleChooser(Generic[T]):
    """``for_definition(definition, language)`` -> ``k`` items (each with ``language`` and
    ``definition``) of that language (English when it has none), chosen by ``strategy``."""

    def __init__(
        self,
        items: Sequence[T],
        *,
        k: int,
        strategy: str = "random",
        seed: int = 0,
        embed: Callable[[list[str]], Any] | None = None,
    ):
        self.k, self.strategy, self.embed = k, strategy, embed
        self.by_language: dict[str, list[T]] = {}
        for item in items:
            self.by_language.setdefault(item.language, []).append(item)
        rng = random.Random(seed)
        self.fixed = {lang: rng.sample(rows, min(k, len(rows))) for lang, rows in sorted(self.by_language.items())}

    def for_definition(self, definition: str, language: str) -> list[T]:
        rows = self.by_language.get(language) or self.by_language.get("en", [])
        if self.strategy != "nearest" or self.embed is None or not rows:
            return self.fixed.get(language) or self.fixed.get("en", [])
        vectors = np.asarray(self.embed([definition] + [r.definition for r in rows]))
        norms = np.linalg.norm(vectors, axis=1) + 1e-9
        scores = vectors[1:] @ vectors[0] / (norms[1:] * norms[0])
        return [rows[i] for i in np.argsort(-scores, kind="stable")[: self.k]]


class PlannerExamples(ExampleChooser[PlannerExample]):
    """The planner's ``k`` worked examples (``tagging.demos.k``), from ``planner_examples.jsonl``."""

    def __init__(self, examples: Sequence[PlannerExample] | None = None, *, k: int = 2, **options):
        super().__init__(load_planner_examples() if examples is None else examples, k=k, **options)


class SemanticExamples(ExampleChooser[SemanticPair]):
    """One (positive, negative) pair per definition from ``semantic_examples.jsonl``: the semantic
    judge's examples where the concept's own rows give no labelled one."""

    def __init__(self, pairs: Sequence[SemanticPair] | None = None, **options):
        super().__init__(load_semantic_pairs() if pairs is None else pairs, k=1, **options)

    def pair_for(self, definition: str, language: str) -> SemanticPair | None:
        chosen = self.for_definition(definition, language)
        return chosen[0] if chosen else None
