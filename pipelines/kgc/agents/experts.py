"""The three expert roles by task, and what a caller asks of an expert by its task.

agent = make_expert("re", schema)
vars = expert_vars(schema, text="...", language="en", background=True)
messages = agent.render(vars.pop("language"), output_mode="text", **vars)   # exact prompt
extraction = agent.parse(reply, "text")       # Extraction(items, reason, malformed)
record = await agent.run(llm, {**vars, "language": "en"}, tag="ee_2:r1", mode="json")
expert_role("re").answer_text(extraction.items)   # the replica: "[(head, relation, tail), ...]"

Each role (its template name, answer model, parser and answer form) is one module:
:mod:`~pipelines.kgc.agents.ner_expert`, :mod:`~pipelines.kgc.agents.re_expert`,
:mod:`~pipelines.kgc.agents.ee_expert`; what they share is :mod:`~pipelines.kgc.agents.expert_role`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents import Agent
from pipelines.kgc.agents.ee_expert import EE_EXPERT
from pipelines.kgc.agents.expert_role import ExpertRole, Extraction
from pipelines.kgc.agents.ner_expert import NER_EXPERT
from pipelines.kgc.agents.re_expert import RE_EXPERT
from pipelines.kgc.schema import Schema

EXPERTS: dict[str, ExpertRole] = {role.task: role for role in (NER_EXPERT, RE_EXPERT, EE_EXPERT)}
DISPLAY = {language: {task: role.display[language] for task, role in EXPERTS.items()} for language in ("en", "zh")}


def expert_role(task: str) -> ExpertRole:
    """The role of ``task`` (``ner``, ``re`` or ``ee``)."""
    if task not in EXPERTS:
        raise ValueError(f"unknown task {task!r}; use ner, re or ee")
    return EXPERTS[task]


def types_text(schema: Schema, *, names_only: bool = False) -> str:
    """The constrained type list as the paper writes it: ``[PER, LOC]``, ``[rel: [Head, Tail], ...]``,
    ``[Event: [Role, ...], ...]``; ``names_only``: ``[rel, ...]``, ``[Event, ...]`` (json mode, where
    the answer schema holds the types and each event type's roles)."""
    if names_only:
        return "[" + ", ".join(schema.types()) + "]"
    return expert_role(schema.task).types_text(schema)


def extraction_agent(name: str, folder: Path, task: str, schema: Schema, **options: Any) -> Agent[Extraction]:
    """An agent of template ``<folder>/<name>.<lang>.j2`` whose reply is a ``task`` extraction
    (the baselines' extraction steps); ``options``: see :meth:`ExpertRole.agent`."""
    return expert_role(task).agent(name, folder, schema, **options)


def make_expert(task: str, schema: Schema, **options: Any) -> Agent[Extraction]:
    """The expert of ``task`` (template ``<task>_expert``, role ``<task>_expert``); ``options``:
    see :meth:`ExpertRole.expert`."""
    return expert_role(task).expert(schema, **options)


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
        "json_example": expert_role(schema.task).json_example(reason=round > 0 if reason is None else reason),
        "demonstrations": demonstrations or [],
        "text": text,
        "round": round,
        "last_answer": last_answer,
        "peers": peers or [],
    }
