"""Baselines with scripted replies: AutoKG one call, ChatIE two stages, CoT-ER three stages,
self-consistency voting (via n and via sample indices)."""

from __future__ import annotations

import asyncio
import itertools

from pipelines.agents import SampleTrace
from pipelines.kgc.baselines.autokg import AutoKG
from pipelines.kgc.baselines.chatie import ChatIE, parse_type_list
from pipelines.kgc.baselines.coter import CoTER
from pipelines.kgc.baselines.self_consistency import SelfConsistency, vote
from pipelines.kgc.schema import Sentence, Triple, load_schema
from pipelines.llm.scripted import ScriptedBackend
from pipelines.llm.types import ChatResult, Choice, Usage
from tests.kgc.scripted import llm_for

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


def test_autokg_is_one_call_without_background():
    backend = ScriptedBackend([(r".", BIRTH)])
    result, trace = run(AutoKG(llm_for(backend), SCHEMAS))
    assert len(backend.calls) == 1 and result.calls == 1 and result.failed == 0
    assert len(result.items) == 2 and trace.rows[0]["role"] == "autokg"
    assert backend.calls[0][0]["content"].startswith("The relation extraction task is given")


def test_chatie_asks_types_then_one_turn_per_type():
    backend = ScriptedBackend(
        [
            (r'For the type "/people/person/place_of_birth"', BIRTH),
            (r"Which of the given", "[/people/person/place_of_birth]"),
        ]
    )
    result, trace = run(ChatIE(llm_for(backend), SCHEMAS))
    assert len(backend.calls) == 2 and [r["step"] for r in trace.rows] == [
        "chatie:types",
        "chatie:/people/person/place_of_birth",
    ]
    assert result.items == [Triple("Marie Curie", "/people/person/place_of_birth", "Warsaw")]  # only the asked type
    assert "Your answer: [/people/person/place_of_birth]" in backend.calls[1][-1]["content"]


def test_chatie_type_list_parser():
    assert parse_type_list(NYT, "[/location/country/capital, /location/location/contains]") == [
        "/location/location/contains",
        "/location/country/capital",
    ]
    assert parse_type_list(NYT, "NO") == []


def test_coter_three_steps_carry_evidence():
    backend = ScriptedBackend(
        [
            (r"Step 3", "Warsaw is her birthplace.\nAnswer: [(Marie Curie, /people/person/place_of_birth, Warsaw)]"),
            (r"Step 2", "Warsaw (city), Paris (city)"),
            (r"Step 1", "Marie Curie (person)"),
        ]
    )
    result, trace = run(CoTER(llm_for(backend), SCHEMAS))
    assert len(backend.calls) == 3 and result.calls == 3
    last = backend.calls[2][-1]["content"]
    assert "Step 1 evidence: Marie Curie (person)" in last and "Step 2 evidence: Warsaw (city), Paris (city)" in last
    assert result.items == [Triple("Marie Curie", "/people/person/place_of_birth", "Warsaw")]


def test_vote_keeps_majority_items():
    a, b, c = "a", "b", "c"
    assert vote([[a, b], [a], [a, c, c], [b]], 4) == [a]
    assert vote([[a, b], [a, b], [b]], 3) == [a, b]
    assert vote([], 3) == []


class Cycling:
    """Replies in turn; ``n`` choices take the next n replies."""

    identity = "cycling"

    def __init__(self, replies):
        self.replies = itertools.cycle(replies)
        self.calls = []

    async def chat(self, messages, params):
        self.calls.append(params)
        return ChatResult(
            choices=[Choice(text=next(self.replies)) for _ in range(params.n)], usage=Usage(1, 1), model="c"
        )

    async def close(self):
        return None


REPLIES = [BIRTH, "[(Marie Curie, /people/person/place_of_birth, Warsaw)]", "garbage", BIRTH, "NO"]


def test_self_consistency_via_n_and_via_sample_indices():
    backend = Cycling(REPLIES)
    result, _ = run(SelfConsistency(llm_for(backend), SCHEMAS, k=5, via="n"))
    assert len(backend.calls) == 1 and backend.calls[0].n == 5 and backend.calls[0].temperature == 0.7
    assert result.items == [
        Triple("Marie Curie", "/people/person/place_of_birth", "Warsaw")
    ]  # 3 of 5; place_lived 2 of 5
    backend = Cycling(REPLIES)
    result, trace = run(SelfConsistency(llm_for(backend), SCHEMAS, k=5, via="sample_index", max_attempts=1))
    assert len(trace.rows) == 5 and all(p.n == 1 for p in backend.calls)
    assert result.items == [Triple("Marie Curie", "/people/person/place_of_birth", "Warsaw")]
