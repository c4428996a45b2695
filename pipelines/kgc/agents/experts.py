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
from pipelines.kgc.answers import AnswerBounds, bounds_for, candidate_spans
from pipelines.kgc.parsing import ANSWER_MODELS, Extraction, answer_schema, from_model, json_example, parse_text_answer
from pipelines.kgc.schema import Schema

HERE = Path(__file__).parent
DISPLAY = {
    "en": {"ner": "NER expert agent", "re": "RE expert agent", "ee": "EE expert agent"},
    "zh": {"ner": "命名实体识别专家智能体", "re": "关系抽取专家智能体", "ee": "事件抽取专家智能体"},
}


def types_text(schema: Schema, *, names_only: bool = False) -> str:
    """The constrained type list as the paper writes it: ``[PER, LOC]``, ``[rel: [Head, Tail], ...]``,
    ``[Event: [Role, ...], ...]``; ``names_only``: ``[rel, ...]``, ``[Event, ...]`` (json mode, where
    the answer schema holds the types and each event type's roles)."""
    if schema.task == "ner" or names_only:
        return "[" + ", ".join(schema.types()) + "]"
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
    bounds: AnswerBounds | None = None,
    reason: bool = True,
    spans: str = "sentence",
    **sampling: Any,
) -> Agent[Extraction]:
    """An agent whose reply is a ``task`` extraction: text mode parses the paper's format
    (``schema`` splits tuples whose spans hold commas); json mode validates the task's answer
    model and sends the backend the bounded answer schema (:func:`answer_schema`: ``schema``'s
    types as enums, ``bounds`` (default: per language), the reason field when ``reason``);
    ``spans="sentence"`` narrows it per call to spans of the call's ``text`` variable
    (:func:`candidate_spans`), ``"free"`` keeps any bounded string.
    ``sampling``: Agent keywords (max_attempts, temperature, n, ...)."""
    if spans not in ("sentence", "free"):
        raise ValueError(f"spans must be 'sentence' or 'free', got {spans!r}")
    b = bounds or bounds_for(schema.language)

    def grounded_schema(vars: dict[str, Any]) -> dict[str, Any]:
        choices = candidate_spans(vars["text"], language=schema.language, max_chars=b.span_chars)
        return answer_schema(task, schema, bounds=b, reason=reason, spans=choices)

    agent = Agent(
        name,
        folder,
        partial(parse_text_answer, task, schema=schema),
        role=role or name,
        output=ANSWER_MODELS[task],
        from_output=partial(from_model, task),
        call_schema=grounded_schema if spans == "sentence" else None,
        **{k: v for k, v in sampling.items() if v is not None or k in ("retry_temperature",)},
    )
    agent.json_schema = answer_schema(task, schema, bounds=b, reason=reason)
    return agent


def make_expert(
    task: str,
    schema: Schema,
    *,
    role: str | None = None,
    bounds: AnswerBounds | None = None,
    reason: bool = False,
    spans: str = "sentence",
    **sampling: Any,
) -> Agent[Extraction]:
    """The expert of ``task`` (template ``<task>_expert``, role ``<task>_expert``); ``reason``:
    its json answer starts with a reason (the team's experts), else it extracts directly;
    ``spans``: see :func:`extraction_agent`."""
    name = f"{task}_expert"
    return extraction_agent(
        name, HERE, task, schema, role=role or name, bounds=bounds, reason=reason, spans=spans, **sampling
    )


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
    type_names: bool = False,
    reason: bool | None = None,
) -> dict[str, Any]:
    """Template variables of one expert call (round 0 when ``round == 0``, else collaboration);
    the agent adds ``output_mode`` when it renders (json mode shows ``json_example``, the short
    answer form, with a reason when ``reason`` (default: in collaboration rounds); the backend is
    sent the full schema). ``type_names``: the type list without head/tail types and roles (see
    :func:`types_text`)."""
    return {
        "language": language,
        "background": background,
        "types": types_text(schema, names_only=type_names),
        "json_example": json_example(schema.task, reason=round > 0 if reason is None else reason),
        "demonstrations": demonstrations or [],
        "text": text,
        "round": round,
        "last_answer": last_answer,
        "peers": peers or [],
    }
