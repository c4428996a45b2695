"""The sentence every baseline test extracts from, its schema, a scripted reply, and one run."""

from __future__ import annotations

import asyncio

from pipelines.agents import SampleTrace
from pipelines.kgc.schema import Sentence, Triple, load_schema

NYT = load_schema("nyt11_hrl")
SCHEMAS = {"nyt11_hrl": NYT}
TEXT = "Marie Curie , who was born in Warsaw , lived in Paris ."
SENTENCE = Sentence(
    "nyt11_hrl:1",
    "nyt11_hrl",
    "re",
    "en",
    TEXT,
    triples=[Triple("Marie Curie", "/people/person/place_of_birth", "Warsaw")],
)
BIRTH = "[(Marie Curie, /people/person/place_of_birth, Warsaw), (Marie Curie, /people/person/place_lived, Paris)]"


def run(system, sentence=SENTENCE):
    trace = SampleTrace(sentence.id)
    return asyncio.run(system.run(sentence, trace)), trace
