"""Json-mode answers: one pydantic model per task, its bounded JSON schema for constrained
decoding, the short answer form shown in prompts, and the mapping of a validated answer to the
typed :class:`Extraction`.

The schema sent to the backend (:func:`answer_schema`) bounds everything a reply can hold, so a
schema-valid reply closes within the task's ``max_tokens`` instead of being cut off:

- type fields are enums of the dataset's schema (entity types, relation names, event types), and
  each event type admits only its own argument roles (one ``anyOf`` branch per event type);
- every span (entity, head, tail, trigger, argument) is one of the sentence's own substrings of
  at most ``span_chars`` characters (:func:`candidate_spans`; ``team.spans: sentence``, grounded
  decoding as in grammar-constrained IE), or with ``team.spans: free`` any 1 to ``span_chars``
  characters; every list at most ``items`` entries (``arguments`` per event), the reason at most
  ``reason_chars`` (xgrammar counts characters and admits no escapes inside bounded strings);
- ``reason`` comes first in every answer of a team expert (Algorithm 1: every reply r_t is a
  reasoning response that the replica simplifies away); the single-call baselines extract
  directly; every property is required.

With free spans, what the schema cannot bound (a span that does not occur in the sentence) is
counted after parsing.
The pydantic models stay unbounded: they validate replies of backends without constrained decoding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from pipelines.config import StrictModel
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
    "ner": '{"reason": "...", "entities": [{"type": "...", "text": "..."}]}',
    "re": '{"reason": "...", "triples": [{"head": "...", "relation": "...", "tail": "..."}]}',
    "ee": '{"reason": "...", "events": [{"event_type": "...", "trigger": "...", "arguments": [{"role": "...", '
    '"text": "..."}]}]}',
}
"""The answer form shown to the model in json mode: keys only (the backend enforces the full schema;
placeholder words such as ``<head entity>`` were copied verbatim by SmolLM2 into 2 of 6 answers)."""

ITEMS_KEY = {"ner": "entities", "re": "triples", "ee": "events"}


def json_example(task: str, *, reason: bool = True) -> str:
    """The answer form of ``task`` shown in json mode, with or without the ``reason`` field."""
    return JSON_EXAMPLES[task] if reason else JSON_EXAMPLES[task].replace('"reason": "...", ', "")


class AnswerBounds(StrictModel):
    """Upper bounds written into a json-mode answer schema (see the module doc); choose them so
    that the longest schema-valid reply fits the task's ``max_tokens``."""

    items: int = Field(3, ge=1, description="entities / triples / events per answer")
    arguments: int = Field(2, ge=0, description="arguments per event")
    span_chars: int = Field(32, ge=1, description="characters of an entity, head, tail, trigger or argument")
    reason_chars: int = Field(80, ge=0, description="characters of a team expert's reason")


DEFAULT_BOUNDS = {"en": AnswerBounds(), "zh": AnswerBounds(span_chars=10, reason_chars=24)}
"""Per language: Chinese takes about 1.9 SmolLM2 tokens per character, English about 0.25."""


def bounds_for(language: str, table: dict[str, AnswerBounds] | None = None) -> AnswerBounds:
    """The bounds of ``language`` in ``table`` (else :data:`DEFAULT_BOUNDS`, else the English ones)."""
    for candidates in (table or {}, DEFAULT_BOUNDS):
        if language in candidates:
            return candidates[language]
    return DEFAULT_BOUNDS["en"]


_WORD = re.compile(r"\w+|[^\w\s]")
MAX_SPAN_CHOICES = 1000
"""Above this many candidate spans a call falls back to free bounded spans (OpenAI's structured
outputs admit at most 1,000 enum values per schema)."""


def candidate_spans(text: str, *, language: str, max_chars: int) -> list[str]:
    """The substrings of ``text`` a span may be, at most ``max_chars`` characters, sorted.

    Chinese (``zh``): every run of 1 to ``max_chars`` characters that starts and ends with a letter
    or digit (text is read in characters, never split on whitespace). Other languages: runs of
    tokens (``\\w+`` or one mark) from a word that follows a space, the text's start or a mark
    after a space, to a word or mark that a space, the text's end or a mark before a space follows,
    so ``Standard & Poor``, ``U.S.``, ``Reuters`` (in ``(Reuters)``) and ``Ukraine`` (in
    ``Ukraine.``) are candidates, and ``S`` or ``May .`` are not. Quotes and backslashes count
    as spaces (no candidate holds one)."""
    spans: set[str] = set()
    text = text.replace('"', " ").replace("\\", " ")  # no quote or backslash: xgrammar admits no escape
    if language == "zh":
        for start in range(len(text)):
            for end in range(start + 1, min(len(text), start + max_chars) + 1):
                if text[start].isalnum() and text[end - 1].isalnum():
                    spans.add(text[start:end])
        return sorted(spans)
    tokens = list(_WORD.finditer(text))

    def spaced(position: int) -> bool:  # the text's edge or whitespace at ``position``
        return position < 0 or position >= len(text) or text[position].isspace()

    def opens(i: int) -> bool:
        start = tokens[i].start()
        if spaced(start - 1):
            return True
        before = tokens[i - 1]
        return before.end() == start and not before.group()[0].isalnum() and spaced(before.start() - 1)

    def closes(j: int) -> bool:
        end = tokens[j].end()
        if spaced(end):
            return True
        after = tokens[j + 1]
        return after.start() == end and not after.group()[0].isalnum() and spaced(after.end())

    for i, first in enumerate(tokens):
        if not (first.group()[0].isalnum() or first.group()[0] == "_") or not opens(i):
            continue
        for j in range(i, len(tokens)):
            if tokens[j].end() - first.start() > max_chars:
                break
            detached_mark = not tokens[j].group()[0].isalnum() and spaced(tokens[j].start() - 1)
            if closes(j) and not detached_mark:
                spans.add(text[first.start() : tokens[j].end()])
    return sorted(spans)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _choice(names: list[str], fallback: dict[str, Any]) -> dict[str, Any]:
    return {"enum": names} if names else fallback


def answer_schema(
    task: str,
    schema: Schema | None = None,
    *,
    bounds: AnswerBounds | None = None,
    reason: bool = True,
    spans: list[str] | None = None,
) -> dict[str, Any]:
    """The bounded JSON schema of a task's answer: ``{"reason"?, "<items key>": [...]}``.

    ``schema`` (a dataset's) turns type fields into enums and gives each event type its roles;
    ``bounds`` default to :data:`DEFAULT_BOUNDS` of the schema's language; ``reason`` adds the
    reason field first (the team's experts); ``spans`` (e.g. :func:`candidate_spans` of the
    sentence) are the only values a span may take (None or too many: any bounded string), as one
    enum under ``$defs`` that every span field references (EE repeats the span fields in each
    event type's branch: 99 copies of the enum for the ACE schema otherwise, over OpenAI's limit of
    1,000 enum values per schema)."""
    b = bounds or bounds_for(schema.language if schema else "en")
    span: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": b.span_chars}
    definitions: dict[str, Any] = {}
    if spans and len(spans) <= MAX_SPAN_CHOICES:  # one enum, referenced by every span field
        definitions = {"span": {"enum": list(spans)}}
        span = {"$ref": "#/$defs/span"}
    label = {"type": "string", "minLength": 1, "maxLength": b.span_chars}
    types = schema.types() if schema is not None else []
    if task == "ner":
        item = _object({"type": _choice(types, label), "text": span})
    elif task == "re":
        item = _object({"head": span, "relation": _choice(types, label), "tail": span})
    elif task == "ee":

        def event(event_type: dict[str, Any], roles: list[str]) -> dict[str, Any]:
            argument = _object({"role": _choice(roles, label), "text": span})
            limit = b.arguments if roles or not types else 0
            arguments = {"type": "array", "items": argument, "maxItems": limit}
            return _object({"event_type": event_type, "trigger": span, "arguments": arguments})

        if types:
            item = {"anyOf": [event({"const": name}, list(schema.events[name])) for name in types]}
        else:
            item = event(label, [])
    else:
        raise ValueError(f"unknown task {task!r}; use ner, re or ee")
    properties: dict[str, Any] = {"reason": {"type": "string", "maxLength": b.reason_chars}} if reason else {}
    properties[ITEMS_KEY[task]] = {"type": "array", "items": item, "maxItems": b.items}
    answer = _object(properties)
    return {**answer, "$defs": definitions} if definitions else answer


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
