"""Json-mode answers: one pydantic model per task, its JSON schema (type fields as enums of a
dataset's schema) for constrained decoding, the short answer form shown in prompts, and the
mapping of a validated answer to the typed :class:`Extraction`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from pipelines.kgc.schema import Argument, Entity, Event, Schema, Triple


@dataclass
class Extraction:
    """One expert's parsed answer: the items, the reasons given, and tuples that did not fit."""

    items: list[Any] = field(default_factory=list)
    reason: str = ""
    malformed: int = 0


class NEREntity(BaseModel):
    type: str
    text: str


class NERAnswer(BaseModel):
    reason: str = ""
    entities: list[NEREntity]


class RETriple(BaseModel):
    head: str
    relation: str
    tail: str


class REAnswer(BaseModel):
    reason: str = ""
    triples: list[RETriple]


class EEArgument(BaseModel):
    role: str
    text: str


class EEEvent(BaseModel):
    event_type: str
    trigger: str
    arguments: list[EEArgument] = []


class EEAnswer(BaseModel):
    reason: str = ""
    events: list[EEEvent]


ANSWER_MODELS: dict[str, type[BaseModel]] = {"ner": NERAnswer, "re": REAnswer, "ee": EEAnswer}


JSON_EXAMPLES = {
    "ner": '{"reason": "...", "entities": [{"type": "<entity type>", "text": "<entity>"}]}',
    "re": '{"reason": "...", "triples": [{"head": "<head entity>", "relation": "<relation type>", '
    '"tail": "<tail entity>"}]}',
    "ee": '{"reason": "...", "events": [{"event_type": "<event type>", "trigger": "<trigger word>", '
    '"arguments": [{"role": "<role>", "text": "<argument>"}]}]}',
}
"""The answer form shown to the model in json mode (short; the backend enforces the full schema)."""


def answer_schema(task: str, schema: Schema | None = None) -> dict[str, Any]:
    """The JSON schema of a task's answer; with ``schema``, type fields are enums of its types."""
    result = ANSWER_MODELS[task].model_json_schema()
    if schema is not None:
        defs = result.get("$defs", {})
        enum = {"ner": ("NEREntity", "type"), "re": ("RETriple", "relation"), "ee": ("EEEvent", "event_type")}[task]
        if schema.types():
            defs[enum[0]]["properties"][enum[1]]["enum"] = schema.types()
        if task == "ee":
            roles = sorted({r for roles in schema.events.values() for r in roles})
            defs["EEArgument"]["properties"]["role"]["enum"] = roles
    return result


def from_model(task: str, answer: BaseModel) -> Extraction:
    """A validated answer model as the typed extraction."""
    if task == "ner":
        items: list[Any] = [Entity(e.type.strip(), e.text.strip()) for e in answer.entities]
    elif task == "re":
        items = [Triple(t.head.strip(), t.relation.strip(), t.tail.strip()) for t in answer.triples]
    else:
        items = [
            Event(
                e.event_type.strip(),
                e.trigger.strip(),
                tuple(Argument(a.role.strip(), a.text.strip()) for a in e.arguments),
            )
            for e in answer.events
        ]
    return Extraction(items, answer.reason.strip())
