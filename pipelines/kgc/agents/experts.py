"""Expert agents: template ``<task>_expert.<lang>.j2`` + the task's parser (text or json mode).

agent = make_expert("re", schema, mode="text")
messages = agent.render("en", **expert_vars(schema, text=..., background=True, ...))
extraction = agent.parse(reply)          # Extraction(items, reason, malformed)
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from pipelines.agents import Agent
from pipelines.kgc.parsing import Extraction, answer_schema, parse_json_answer, parse_text_answer
from pipelines.kgc.schema import Schema

HERE = Path(__file__).parent
DISPLAY = {
    "en": {"ner": "NER expert agent", "re": "RE expert agent", "ee": "EE expert agent"},
    "zh": {"ner": "命名实体识别专家智能体", "re": "关系抽取专家智能体", "ee": "事件抽取专家智能体"},
}


def types_text(schema: Schema) -> str:
    """The constrained type list as the paper writes it: ``[PER, LOC]``, ``[rel: [Head, Tail], ...]``,
    ``[Event: [Role, ...], ...]``."""
    if schema.task == "ner":
        return "[" + ", ".join(schema.entity_types) + "]"
    if schema.task == "re":
        return "[" + ", ".join(f"{r}: [{h}, {t}]" for r, (h, t) in schema.relations.items()) + "]"
    return "[" + ", ".join(f"{e}: [{', '.join(roles)}]" for e, roles in schema.events.items()) + "]"


def _parse(task: str, mode: str, schema: Schema, text: str) -> Extraction:
    return parse_json_answer(task, text) if mode == "json" else parse_text_answer(task, text, schema)


def make_expert(
    task: str,
    schema: Schema,
    *,
    mode: str = "text",
    max_attempts: int = 2,
    retry_temperature: float | None = 0.7,
    max_tokens: int | None = None,
    name: str | None = None,
) -> Agent[Extraction]:
    """The expert of ``task`` whose parser knows ``schema`` (to split tuples whose spans hold commas)."""
    return Agent(
        f"{task}_expert",
        HERE,
        partial(_parse, task, mode, schema),
        role=name or f"{task}_expert",
        max_attempts=max_attempts,
        retry_temperature=retry_temperature,
        max_tokens=max_tokens,
    )


def expert_vars(
    schema: Schema,
    *,
    text: str,
    language: str,
    mode: str = "text",
    background: bool = True,
    demonstrations: list[dict[str, str]] | None = None,
    round: int = 0,
    last_answer: str = "",
    peers: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Template variables of one expert call (round 0 when ``round == 0``, else collaboration)."""
    return {
        "language": language,
        "background": background,
        "output_mode": mode,
        "output_schema": json.dumps(answer_schema(schema.task, schema), ensure_ascii=False, indent=1)
        if mode == "json"
        else "",
        "types": types_text(schema),
        "demonstrations": demonstrations or [],
        "text": text,
        "round": round,
        "last_answer": last_answer,
        "peers": peers or [],
    }
