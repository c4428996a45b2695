"""Scripted experts for the KGC tests: the paper's Messi example (Figure 1)."""

from __future__ import annotations

import numpy as np

from pipelines.kgc.schema import Argument, Event, Sentence
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend

MESSI = "Born in Rosario , Argentina in 1987 Lionel Messi is one of the greatest football players ."
NER_REPLY = "[(PERSON, Lionel Messi), (GPE, Rosario), (GPE, Argentina), (DATE, 1987)]"
RE_REPLY = "[(Lionel Messi, per:date_of_birth, 1987), (Lionel Messi, per:city_of_birth, Rosario)]"
EE_ALONE = "[{Trigger Type: Life:Be-Born, Trigger Word: Born, Arguments: [(Person, Lionel Messi), (Place, Rosario)]}]"
EE_WITH_TIME = (
    "The NER expert recognises 1987 as a DATE and the RE expert gives the date of birth 1987, so the "
    "Be-Born event has the Time argument 1987.\nAnswer: [{Trigger Type: Life:Be-Born, Trigger Word: Born, "
    "Arguments: [(Person, Lionel Messi), (Place, Rosario), (Time, 1987)]}]"
)


def messi_sentence() -> Sentence:
    args = (Argument("Person", "Lionel Messi"), Argument("Place", "Rosario"), Argument("Time", "1987"))
    return Sentence("ace05:messi", "ace05", "ee", "en", MESSI, events=[Event("Life:Be-Born", "Born", args)])


def messi_rules():
    return [
        (r"The named entity recognition task", NER_REPLY),
        (r"The relation extraction task", RE_REPLY),
        (r"\(DATE, 1987\)", EE_WITH_TIME),
        (r"event extraction", EE_ALONE),
    ]


def llm_for(backend: ScriptedBackend):
    return lambda role: LLM(backend, role=role)


def char_embed(texts: list[str]) -> np.ndarray:
    """A deterministic test embedding: normalised letter counts."""
    out = np.zeros((len(texts), 26), dtype=np.float32)
    for i, text in enumerate(texts):
        for ch in text.lower():
            if "a" <= ch <= "z":
                out[i, ord(ch) - 97] += 1
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
