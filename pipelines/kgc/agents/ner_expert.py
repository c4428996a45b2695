"""The NER expert: template ``ner_expert.<lang>.j2``, answer ``[(entity type, entity span), ...]``
in text mode (a table ``| type | entity |`` too), :class:`NERAnswer` in json mode."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pipelines.kgc.agents.answer_bounds import AnswerBounds
from pipelines.kgc.agents.expert_role import ExpertRole, Extraction, choice, json_object
from pipelines.kgc.schema import Entity, Schema


class NEREntity(BaseModel):
    type: str
    text: str


class NERAnswer(BaseModel):
    reason: str = ""
    entities: list[NEREntity]


class NERExpert(ExpertRole):
    task = "ner"
    template = "ner_expert"
    display = {"en": "NER expert agent", "zh": "命名实体识别专家智能体"}
    answer_model = NERAnswer
    items_key = "entities"
    example = '{"reason": "...", "entities": [{"type": "...", "text": "..."}]}'
    format_hint = "[(entity type, entity span), ...]"

    def types_text(self, schema: Schema) -> str:
        """``[PER, LOC]``."""
        return "[" + ", ".join(schema.types()) + "]"

    def item_schema(
        self, schema: Schema | None, types: list[str], *, span: dict, label: dict, bounds: AnswerBounds
    ) -> dict[str, Any]:
        return json_object({"type": choice(types, label), "text": span})

    def from_model(self, answer: BaseModel) -> Extraction:
        return Extraction([Entity(e.type.strip(), e.text.strip()) for e in answer.entities], answer.reason.strip())

    def item_json(self, item: Entity) -> dict[str, Any]:
        return {"type": item.type, "text": item.text}

    def item_text(self, item: Entity) -> str:
        return f"({item.type}, {item.text})"

    def fit(self, item: Entity, schema: Schema) -> tuple[Entity | None, int]:
        return (item if item.type in schema.entity_types else None), 0

    def spans(self, item: Entity) -> list[str]:
        return [item.text]

    def tuple_item(self, parts: list[str], schema: Schema | None) -> Entity | None:
        """``(type, span)``; ``(span, type)`` when only the last field is a type of ``schema``; a
        span may hold commas."""
        if len(parts) < 2 or not all(parts):
            return None
        types = set(schema.entity_types) if schema else set()
        if types and parts[0] not in types and parts[-1] in types:
            return Entity(parts[-1], ", ".join(parts[:-1]))
        return Entity(parts[0], ", ".join(parts[1:]))

    def table_item(self, cells: list[str], schema: Schema | None) -> Entity | None:
        return self.tuple_item(cells, schema) if len(cells) == 2 else None


NER_EXPERT = NERExpert()
