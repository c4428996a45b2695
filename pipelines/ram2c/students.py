"""Simulated students: distinct personas (grade, two traits, one interest, a reading level).

    personas = make_personas(6, "en", seed=0)
    personas[0].to_vars()  # {"grade": "grade 6", "traits": ["shy", "curious"], ...}

Personas are drawn without repetition from the vocabulary of ``agents/scenario.yaml``, seeded,
so the same seed gives the same students; the student agent answers in character.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import asdict, dataclass

from pipelines.ram2c.scenario import load_scenario


@dataclass(frozen=True)
class Persona:
    id: str
    grade: str
    traits: tuple[str, str]
    interest: str
    reading_level: str

    def to_vars(self) -> dict:
        data = asdict(self)
        data["traits"] = list(self.traits)
        return data


def make_personas(n: int, language: str, *, seed: int = 0) -> list[Persona]:
    """``n`` distinct personas in ``language``; when ``n`` exceeds the distinct combinations they repeat
    in the same order (ids stay distinct)."""
    vocab = load_scenario()["students"]
    grades, traits = vocab["grades"][language], vocab["traits"][language]
    interests, levels = vocab["interests"][language], vocab["reading_levels"][language]
    combos = list(
        itertools.product(
            range(len(grades)), itertools.combinations(range(len(traits)), 2), range(len(interests)), range(len(levels))
        )
    )
    random.Random(seed).shuffle(combos)
    out = []
    for i in range(n):
        g, (t1, t2), it, lv = combos[i % len(combos)]
        out.append(Persona(f"s{i}", grades[g], (traits[t1], traits[t2]), interests[it], levels[lv]))
    return out


def persona_by_id(persona_id: object, language: str, *, seed: int = 0) -> Persona | None:
    """The persona ``s<i>`` that :func:`make_personas` (same ``language`` and ``seed``) gave the
    i-th dialogue, as recorded in a pair's ``meta.student``; None for an id of another form."""
    text = str(persona_id or "")
    if not (text.startswith("s") and text[1:].isdigit()):
        return None
    index = int(text[1:])
    return make_personas(index + 1, language, seed=seed)[index]
