"""Self-consistency baseline: k samples of one expert (round 0, its knowledge background) at a
temperature above 0, then a vote: an item is kept when more than half of the k samples hold it.

``via: n`` asks for the k samples in one request (``n = k``); ``via: sample_index`` makes k
requests with sample indices 0..k-1 (for servers without ``n``). A sample that does not parse
votes for nothing.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.kgc.agents.experts import expert_role, expert_vars, make_expert
from pipelines.kgc.baselines.common import BaselineResult
from pipelines.kgc.schema import Schema, Sentence


def vote(samples: list[list[Any]], k: int) -> list[Any]:
    """Items held by more than ``k / 2`` of the samples, in first-seen order."""
    counts: Counter = Counter()
    order: list[Any] = []
    for items in samples:
        for item in dict.fromkeys(items):
            counts[item] += 1
            if counts[item] == 1:
                order.append(item)
    return [item for item in order if counts[item] * 2 > k]


class SelfConsistency:
    def __init__(
        self,
        llm_for: Callable[[str], Any],
        schemas: dict[str, Schema],
        *,
        k: int = 5,
        temperature: float = 0.7,
        via: str = "n",
        mode: str = "text",
        **sampling: Any,
    ):
        self.llm = llm_for("self_consistency")
        self.schemas, self.k, self.temperature, self.via, self.mode = schemas, k, temperature, via, mode
        self.sampling = sampling
        self._agents: dict[str, Any] = {}

    async def run(self, sentence: Sentence, trace: SampleTrace) -> BaselineResult:
        schema = self.schemas[sentence.dataset]
        if schema.name not in self._agents:
            n = self.k if self.via == "n" else None
            agent = make_expert(
                schema.task, schema, role="self_consistency", temperature=self.temperature, n=n, **self.sampling
            )
            self._agents[schema.name] = agent
        agent = self._agents[schema.name]
        vars = expert_vars(schema, text=sentence.text, language=sentence.language)
        if self.via == "n":
            records = [await agent.run(self.llm, vars, tag="self_consistency", mode=self.mode)]
            choices = [c["parsed"] for c in records[0].choices if c["error"] is None]
        else:
            records = await asyncio.gather(
                *(
                    agent.run(self.llm, vars, sample_index=i, tag="self_consistency", mode=self.mode)
                    for i in range(self.k)
                )
            )
            choices = [r.parsed for r in records if r.ok]
        samples = [expert_role(schema.task).schema_filter(c.items, schema)[0] for c in choices]
        for index, record in enumerate(records):
            trace.add(record, step="self_consistency", sample=index)
        items = vote(samples, self.k)
        return BaselineResult(items, sum(r.calls for r in records), sum(not r.ok for r in records))
