"""CoT-ER-style baseline (three stages of explicit evidence): step 1 lists concept-level mentions on
the head side (head entities / entity mentions / triggers), step 2 on the tail side (tail entities /
entity types / arguments), step 3 extracts the results with explicit evidence from both."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.agents import Agent, ParseError, SampleTrace
from pipelines.kgc.agents.experts import expert_role, extraction_agent, types_text
from pipelines.kgc.baselines.common import BaselineResult, StepBaseline, extraction_step, words
from pipelines.kgc.schema import Schema, Sentence

HERE = Path(__file__).parent


def parse_evidence(text: str) -> str:
    """Evidence of steps 1 and 2: the reply text itself, which must not be empty."""
    evidence = " ".join(text.split())
    if not evidence:
        raise ParseError("empty evidence")
    return evidence


class CoTER(StepBaseline):
    role = "coter"

    def __init__(self, llm_for: Callable[[str], Any], schemas: dict[str, Schema], **options: Any):
        super().__init__(llm_for, schemas, **options)
        plain = {k: v for k, v in self.sampling.items() if v is not None}
        self.evidence_agent = Agent("coter_step", HERE, parse_evidence, role="coter", **plain)
        self._final: dict[str, Any] = {}

    async def run(self, sentence: Sentence, trace: SampleTrace) -> BaselineResult:
        schema = self.schemas[sentence.dataset]
        if schema.name not in self._final:
            self._final[schema.name] = extraction_agent(
                "coter_step", HERE, schema.task, schema, role="coter", spans=self.spans, **self.sampling
            )
        vars: dict[str, Any] = {
            "text": sentence.text,
            "language": sentence.language,
            "types": types_text(schema),
            "json_example": expert_role(schema.task).json_example(),
        }
        vars.update(words(sentence.language, schema.task))
        result = BaselineResult()
        for step in (1, 2):
            record = await self.evidence_agent.run(
                self.llm, {**vars, "step": step, **_evidence(vars)}, tag=f"coter:{step}"
            )
            trace.add(record, step=f"coter:{step}")
            result.calls += record.calls
            result.failed += int(not record.ok)
            vars[f"evidence_{step}"] = record.parsed if record.ok else "NO"
        items, record = await extraction_step(
            self._final[schema.name], self.llm, {**vars, "step": 3}, schema, trace, tag="coter:3", mode=self.mode
        )
        result.items, result.calls, result.failed = (
            items,
            result.calls + record.calls,
            result.failed + int(not record.ok),
        )
        return result


def _evidence(vars: dict[str, Any]) -> dict[str, str]:
    return {k: vars.get(k, "") for k in ("evidence_1", "evidence_2")}
