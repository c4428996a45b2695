"""Self-consistency with scripted replies: the majority vote, k samples via n and via sample indices."""

from __future__ import annotations

import itertools

from pipelines.kgc.baselines.self_consistency import SelfConsistency, vote
from pipelines.kgc.schema import Triple
from pipelines.llm.types import ChatResult, Choice, Usage
from tests.kgc.baselines.curie import BIRTH, SCHEMAS, run
from tests.kgc.scripted import llm_for


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
