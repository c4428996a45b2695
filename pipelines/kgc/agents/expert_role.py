"""What every extraction role shares: the typed answer (:class:`Extraction`) and :class:`ExpertRole`,
which reads a reply, writes the answer back (the simplification S), bounds the json answer and
builds the agent, calling its role (NER, RE, EE: one module each) for the task-specific parts.

Text mode reads the paper's formats from free text (after the last ``Answer:`` / ``答案：`` line
when there is one, so reasons before it are ignored), and also Markdown tables with the same
columns and JSON in the json-mode shape; ``NO`` (无/没有) is an empty answer. Complete tuples of a
truncated reply are kept; a tuple of the wrong shape is counted in ``malformed``. A reply with
nothing of the kind raises :class:`ParseError`.

Json mode validates the reply against the role's pydantic answer model (unbounded: it validates
replies of backends without constrained decoding); the backend is sent the bounded answer schema
(see :mod:`pipelines.kgc.agents.answer_bounds`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from pipelines.agents import Agent, ParseError
from pipelines.kgc.agents.answer_bounds import MAX_SPAN_CHOICES, AnswerBounds, bounds_for, candidate_spans
from pipelines.kgc.agents.reply_text import TUPLE, answer_and_reason, json_values, says_no, split_fields, table_rows
from pipelines.kgc.schema import Schema
from pipelines.kgc.scoring import norm

HERE = Path(__file__).parent


@dataclass
class Extraction:
    """One expert's parsed answer: the items, the reasons given, and tuples that did not fit."""

    items: list[Any] = field(default_factory=list)
    reason: str = ""
    malformed: int = 0


def json_object(properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON-schema object whose properties are all required and nothing else allowed."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def choice(names: list[str], fallback: dict[str, Any]) -> dict[str, Any]:
    """An enum of ``names``, or ``fallback`` when there are none."""
    return {"enum": names} if names else fallback


class ExpertRole(ABC):
    """One extraction task's role. A role module sets the class attributes and the abstract item
    hooks (and ``table_item``, ``records`` or ``from_table`` where its replies need them); the
    reading and writing around them is shared here."""

    task: ClassVar[str]
    template: ClassVar[str]
    """``<template>.<lang>.j2`` beside this module (the paper's prompt for the task)."""
    display: ClassVar[dict[str, str]]
    """How peers see the expert, per language."""
    answer_model: ClassVar[type[BaseModel]]
    items_key: ClassVar[str]
    example: ClassVar[str]
    """The answer form shown to the model in json mode: keys only (the backend enforces the full
    schema; placeholder words such as ``<head entity>`` were copied verbatim by SmolLM2 into 2 of 6
    answers)."""
    format_hint: ClassVar[str]
    """The paper's text format, named when a reply holds no answer."""

    # ------------------------------------------------------------ hooks of a role

    @abstractmethod
    def types_text(self, schema: Schema) -> str:
        """The constrained type list as the paper writes it for this task."""

    @abstractmethod
    def item_schema(
        self, schema: Schema | None, types: list[str], *, span: dict, label: dict, bounds: AnswerBounds
    ) -> dict[str, Any]:
        """The JSON schema of one answer item (``span``: a span field's schema, ``label``: a free type's)."""

    @abstractmethod
    def from_model(self, answer: BaseModel) -> Extraction:
        """A validated answer model as the typed extraction."""

    @abstractmethod
    def item_json(self, item: Any) -> dict[str, Any]:
        """The item as json mode writes it in the answer's list."""

    @abstractmethod
    def item_text(self, item: Any) -> str:
        """The item in the paper's text format (one tuple or record)."""

    @abstractmethod
    def fit(self, item: Any, schema: Schema) -> tuple[Any | None, int]:
        """``(item, roles dropped)``: the item as ``schema`` admits it, or None outside it."""

    @abstractmethod
    def spans(self, item: Any) -> list[str]:
        """The spans of the sentence an item holds."""

    def item_type(self, item: Any) -> str:
        """The schema type an item is of (an entity type, a relation, an event type)."""
        return item.type

    @abstractmethod
    def tuple_item(self, parts: list[str], schema: Schema | None) -> Any | None:
        """An item from a tuple's fields, or None when they do not make one."""

    def table_item(self, cells: list[str], schema: Schema | None) -> Any | None:
        """An item from a table row's cells, or None (by default no row makes one)."""
        return None

    def records(self, answer: str, reason: str) -> Extraction | None:
        """Items in a task's own record format (EE's ``{Trigger Type: ...}``), else None."""
        return None

    # ------------------------------------------------------------ text mode

    def parse_text(self, text: str, schema: Schema | None = None) -> Extraction:
        """A text-mode reply in the paper's format (or a table, or json-mode JSON); see module doc.
        ``schema`` splits tuples whose spans hold commas."""
        answer, reason = answer_and_reason(text)
        if says_no(answer):
            return Extraction([], reason)
        try:
            found = self.parse_json(answer)
            found.reason = found.reason or reason
            return found
        except ParseError:
            pass
        found = self.records(answer, reason)
        if found is not None:
            return found
        rows = table_rows(answer)
        if rows:
            table = self.from_table(rows, schema)
            if table.items:
                table.reason = reason
                return table
        out = Extraction(reason=reason)
        for body in TUPLE.findall(answer):
            item = self.tuple_item(split_fields(body), schema)
            if item is None:
                out.malformed += 1
            elif item not in out.items:
                out.items.append(item)
        if not out.items:
            raise ParseError(f"no {self.task} answer found: expected {self.format_hint} or NO")
        return out

    def from_table(self, rows: list[list[str]], schema: Schema | None) -> Extraction:
        """The items of a table's rows; a row that makes none is malformed."""
        out = Extraction()
        for cells in rows:
            item = self.table_item(cells, schema)
            if item is None:
                out.malformed += 1
            elif item not in out.items:
                out.items.append(item)
        return out

    # ------------------------------------------------------------ json mode

    def parse_json(self, text: str) -> Extraction:
        """A json-mode reply validated by the answer model; raises :class:`ParseError`."""
        errors = []
        for value in json_values(text):
            try:
                return self.from_model(self.answer_model.model_validate(value))
            except ValidationError as exc:
                errors.append(str(exc.errors()[0]["msg"]))
        raise ParseError(f"no JSON answer matching the {self.task} schema" + (f" ({errors[0]})" if errors else ""))

    def json_example(self, *, reason: bool = True) -> str:
        """The answer form shown in json mode, with or without the ``reason`` field."""
        return self.example if reason else self.example.replace('"reason": "...", ', "")

    def answer_schema(
        self,
        schema: Schema | None = None,
        *,
        bounds: AnswerBounds | None = None,
        reason: bool = True,
        spans: list[str] | None = None,
    ) -> dict[str, Any]:
        """The bounded JSON schema of the answer: ``{"reason"?, "<items key>": [...]}``.

        ``schema`` (a dataset's) turns type fields into enums and gives each event type its roles;
        ``bounds`` default to the schema language's; ``reason`` adds the reason field first (the
        team's experts); ``spans`` (e.g. :func:`candidate_spans` of the sentence) are the only values
        a span may take (None or too many: any bounded string), as one enum under ``$defs`` that
        every span field references (EE repeats the span fields in each event type's branch: 99
        copies of the enum for the ACE schema otherwise, over OpenAI's limit of 1,000 enum values
        per schema)."""
        b = bounds or bounds_for(schema.language if schema else "en")
        span: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": b.span_chars}
        definitions: dict[str, Any] = {}
        if spans and len(spans) <= MAX_SPAN_CHOICES:  # one enum, referenced by every span field
            definitions = {"span": {"enum": list(spans)}}
            span = {"$ref": "#/$defs/span"}
        label = {"type": "string", "minLength": 1, "maxLength": b.span_chars}
        types = schema.types() if schema is not None else []
        item = self.item_schema(schema, types, span=span, label=label, bounds=b)
        properties: dict[str, Any] = {"reason": {"type": "string", "maxLength": b.reason_chars}} if reason else {}
        properties[self.items_key] = {"type": "array", "items": item, "maxItems": b.items}
        answer = json_object(properties)
        return {**answer, "$defs": definitions} if definitions else answer

    # ------------------------------------------------------------ the answer text (the simplification S)

    def answer_text(self, items: list[Any], *, mode: str = "text", reason: str | None = None) -> str:
        """Items in the answer format of ``mode``: the paper's tuples (``NO`` when empty) or JSON
        (with ``reason`` first when given: the form of a team expert's json answer)."""
        if mode == "json":
            head = {} if reason is None else {"reason": reason}
            return json.dumps({**head, self.items_key: [self.item_json(i) for i in items]}, ensure_ascii=False)
        if not items:
            return "NO"
        return "[" + ", ".join(self.item_text(i) for i in items) + "]"

    def schema_filter(self, items: list[Any], schema: Schema) -> tuple[list[Any], int]:
        """``(kept, dropped)``: items whose types are in ``schema`` (an event keeps only roles of its
        type; an event left with a known type stays), duplicates removed; dropped counts items and roles."""
        kept: list[Any] = []
        dropped = 0
        for item in items:
            fitted, roles_dropped = self.fit(item, schema)
            dropped += roles_dropped
            if fitted is None:
                dropped += 1
            elif fitted not in kept:
                kept.append(fitted)
        return kept, dropped

    def ungrounded(self, items: list[Any], text: str) -> int:
        """How many of ``items`` hold a span that does not occur in ``text`` (after the scorer's
        normalisation of case and whitespace). A schema cannot bound this, so such items are counted
        (and score as false positives), not dropped."""
        sentence = norm(text)
        return sum(any(norm(span) not in sentence for span in self.spans(item)) for item in items)

    # ------------------------------------------------------------ the agent

    def agent(
        self,
        name: str,
        folder: Path,
        schema: Schema,
        *,
        role: str | None = None,
        bounds: AnswerBounds | None = None,
        reason: bool = True,
        spans: str = "sentence",
        **sampling: Any,
    ) -> Agent[Extraction]:
        """An agent (template ``<folder>/<name>.<lang>.j2``) whose reply is this task's extraction:
        text mode parses the paper's format (``schema`` splits tuples whose spans hold commas); json
        mode validates the answer model and sends the backend the bounded answer schema
        (:meth:`answer_schema`: ``schema``'s types as enums, ``bounds`` (default: per language), the
        reason field when ``reason``); ``spans="sentence"`` narrows it per call to spans of the
        call's ``text`` variable (:func:`candidate_spans`), ``"free"`` keeps any bounded string.
        ``sampling``: Agent keywords (max_attempts, temperature, n, ...)."""
        if spans not in ("sentence", "free"):
            raise ValueError(f"spans must be 'sentence' or 'free', got {spans!r}")
        b = bounds or bounds_for(schema.language)

        @lru_cache(maxsize=1024)
        def sentence_schema(text: str) -> dict[str, Any]:
            choices = candidate_spans(text, language=schema.language, max_chars=b.span_chars)
            return self.answer_schema(schema, bounds=b, reason=reason, spans=choices)

        def grounded_schema(vars: dict[str, Any]) -> dict[str, Any]:
            # one schema object per sentence: every call on it (rounds, re-asks) sends that object,
            # whose request-key text and response_format the LLM client then works out once
            return sentence_schema(vars["text"])

        agent = Agent(
            name,
            folder,
            partial(self.parse_text, schema=schema),
            role=role or name,
            output=self.answer_model,
            from_output=self.from_model,
            call_schema=grounded_schema if spans == "sentence" else None,
            **{k: v for k, v in sampling.items() if v is not None or k in ("retry_temperature",)},
        )
        agent.json_schema = self.answer_schema(schema, bounds=b, reason=reason)
        return agent

    def expert(
        self,
        schema: Schema,
        *,
        role: str | None = None,
        bounds: AnswerBounds | None = None,
        reason: bool = False,
        spans: str = "sentence",
        **sampling: Any,
    ) -> Agent[Extraction]:
        """The expert agent (this role's template, LLM role ``<task>_expert`` unless ``role``);
        ``reason``: its json answer starts with a reason (the team's experts), else it extracts
        directly; ``spans``: see :meth:`agent`."""
        return self.agent(
            self.template, HERE, schema, role=role or self.template, bounds=bounds, reason=reason, spans=spans,
            **sampling,
        )
