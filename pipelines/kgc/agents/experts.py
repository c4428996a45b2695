"""Expert agents: template ``<task>_expert.<lang>.j2`` + the task's parser (text) or answer model (json).

agent = make_expert("re", schema)
vars = expert_vars(schema, text="...", language="en", background=True)
messages = agent.render(vars.pop("language"), output_mode="text", **vars)   # exact prompt
extraction = agent.parse(reply, "text")       # Extraction(items, reason, malformed)
record = await agent.run(llm, {**vars, "language": "en"}, tag="ee_2:r1", mode="json")
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from pipelines.agents import Agent
from pipelines.kgc.parsing import ANSWER_MODELS, JSON_EXAMPLES, Extraction, answer_schema, from_model, parse_text_answer
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


def extraction_agent(
    name: str,
    folder: Path,
    task: str,
    schema: Schema,
    *,
    role: str | None = None,
    **sampling: Any,
) -> Agent[Extraction]:
    """An agent whose reply is a ``task`` extraction: text mode parses the paper's format
    (``schema`` splits tuples whose spans hold commas); json mode validates the task's answer
    model, whose JSON schema restricts the type fields to ``schema``'s types (so constrained
    decoding can only pick those). ``sampling``: Agent keywords (max_attempts, temperature, n, ...)."""
    agent = Agent(
        name,
        folder,
        partial(parse_text_answer, task, schema=schema),
        role=role or name,
        output=ANSWER_MODELS[task],
        from_output=partial(from_model, task),
        **{k: v for k, v in sampling.items() if v is not None or k in ("retry_temperature",)},
    )
    agent.json_schema = answer_schema(task, schema)
    return agent


def make_expert(task: str, schema: Schema, *, role: str | None = None, **sampling: Any) -> Agent[Extraction]:
    """The expert of ``task`` (template ``<task>_expert``, role ``<task>_expert``)."""
    return extraction_agent(f"{task}_expert", HERE, task, schema, role=role or f"{task}_expert", **sampling)


def expert_vars(
    schema: Schema,
    *,
    text: str,
    language: str,
    background: bool = True,
    demonstrations: list[dict[str, str]] | None = None,
    round: int = 0,
    last_answer: str = "",
    peers: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Template variables of one expert call (round 0 when ``round == 0``, else collaboration);
    the agent adds ``output_mode`` when it renders (json mode shows ``json_example``, the short
    answer form; the backend is sent the full schema)."""
    return {
        "language": language,
        "background": background,
        "types": types_text(schema),
        "json_example": JSON_EXAMPLES[schema.task],
        "demonstrations": demonstrations or [],
        "text": text,
        "round": round,
        "last_answer": last_answer,
        "peers": peers or [],
    }
