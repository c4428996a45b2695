"""ChatIE-style baseline (two stages, multi-turn): first the types that occur in the sentence, then
for each type found, in a second turn that shows the first one, the results of that type.

Stage 1 is free text in both output modes (a list of type names, read by :func:`parse_type_list`);
stage 2 replies in the output mode's answer format and keeps only results of the asked type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pipelines.agents import Agent, ParseError, SampleTrace
from pipelines.kgc.agents.experts import expert_role, extraction_agent, types_text
from pipelines.kgc.agents.reply_text import NO_ANSWER
from pipelines.kgc.baselines.common import BaselineResult, StepBaseline, extraction_step, words
from pipelines.kgc.schema import Schema, Sentence

HERE = Path(__file__).parent


def parse_type_list(schema: Schema, text: str) -> list[str]:
    """The schema types named in a reply, in schema order (longest names matched first, so a
    type inside a longer one is not counted twice); ``NO`` -> []; nothing known -> ParseError."""
    if NO_ANSWER.match(text.strip()):
        return []
    rest, found = text.casefold(), set()
    for name in sorted(schema.types(), key=len, reverse=True):
        if name.casefold() in rest:
            found.add(name)
            rest = rest.replace(name.casefold(), " ")
    if not found:
        raise ParseError("no type of the schema named in the reply (expected [type 1, ...] or NO)")
    return [t for t in schema.types() if t in found]


class ChatIE(StepBaseline):
    role = "chatie"

    def __init__(self, llm_for: Callable[[str], Any], schemas: dict[str, Schema], **options: Any):
        super().__init__(llm_for, schemas, **options)
        self._agents: dict[tuple[str, str], Any] = {}

    def _agent(self, kind: str, schema: Schema) -> Any:
        key = (kind, schema.name)
        if key not in self._agents:
            if kind == "types":
                self._agents[key] = Agent(
                    "chatie_types",
                    HERE,
                    partial(parse_type_list, schema),
                    role="chatie",
                    **{k: v for k, v in self.sampling.items() if v is not None},
                )
            else:
                self._agents[key] = extraction_agent(
                    "chatie_arguments", HERE, schema.task, schema, role="chatie", spans=self.spans, **self.sampling
                )
        return self._agents[key]

    async def run(self, sentence: Sentence, trace: SampleTrace) -> BaselineResult:
        schema = self.schemas[sentence.dataset]
        base = {
            "text": sentence.text,
            "language": sentence.language,
            "types": types_text(schema),
            "json_example": expert_role(schema.task).json_example(),
        }
        base.update(
            {
                k: v
                for k, v in words(sentence.language, schema.task).items()
                if k in ("task_name", "list_name", "format_example")
            }
        )
        first = await self._agent("types", schema).run(self.llm, base, tag="chatie:types", mode="text")
        trace.add(first, step="chatie:types")
        result = BaselineResult(calls=first.calls, failed=int(not first.ok))
        found = first.parsed if first.ok else []
        steps = await asyncio.gather(
            *(
                extraction_step(
                    self._agent("arguments", schema),
                    self.llm,
                    {**base, "found": "[" + ", ".join(found) + "]", "type": kind},
                    schema,
                    trace,
                    tag=f"chatie:{kind}",
                    mode=self.mode,
                )
                for kind in found
            )
        )
        for kind, (items, record) in zip(found, steps, strict=True):
            result.calls += record.calls
            result.failed += int(not record.ok)
            for item in items:
                if expert_role(schema.task).item_type(item) == kind and item not in result.items:
                    result.items.append(item)
        return result
