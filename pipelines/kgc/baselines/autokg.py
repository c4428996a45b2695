"""AutoKG-style baseline: one LLM call with the task definition and the schema (0- or K-shot),
without the team's knowledge background or collaboration (the vanilla LLM extractor). ``bounds``
and ``type_names`` are the team's json-mode answer bounds and type list, so both systems get the
same prompt form and the same answer schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.kgc.agents.answer_bounds import AnswerBounds, bounds_for
from pipelines.kgc.agents.experts import expert_vars, make_expert
from pipelines.kgc.baselines.common import BaselineResult, extraction_step
from pipelines.kgc.demos import DemoSelector, demonstration_vars
from pipelines.kgc.schema import Schema, Sentence


class AutoKG:
    def __init__(
        self,
        llm_for: Callable[[str], Any],
        schemas: dict[str, Schema],
        *,
        shots: int = 0,
        selector: DemoSelector | None = None,
        mode: str = "text",
        bounds: dict[str, AnswerBounds] | None = None,
        type_names: bool = False,
        **sampling: Any,
    ):
        self.llm = llm_for("autokg")
        self.bounds, self.type_names = bounds, type_names
        self.schemas, self.shots, self.selector, self.mode, self.sampling = schemas, shots, selector, mode, sampling
        self._agents: dict[str, Any] = {}

    async def run(self, sentence: Sentence, trace: SampleTrace) -> BaselineResult:
        schema = self.schemas[sentence.dataset]
        if schema.name not in self._agents:
            self._agents[schema.name] = make_expert(
                schema.task, schema, role="autokg", bounds=bounds_for(schema.language, self.bounds), **self.sampling
            )
        demos = demonstration_vars(
            self.selector, sentence.dataset, sentence.text, schema.task, self.shots, mode=self.mode
        )
        vars = expert_vars(
            schema,
            text=sentence.text,
            language=sentence.language,
            background=False,
            demonstrations=demos,
            type_names=self.type_names,
        )
        items, record = await extraction_step(
            self._agents[schema.name], self.llm, vars, schema, trace, tag="autokg", mode=self.mode
        )
        return BaselineResult(items, record.calls, int(not record.ok))
