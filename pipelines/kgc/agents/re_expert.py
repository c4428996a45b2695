"""The RE expert: template ``re_expert.<lang>.j2``, answer ``[(head entity, relation type, tail
entity), ...]`` in text mode (a table ``| head | relation | tail |`` too), :class:`REAnswer` in json
mode."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pipelines.kgc.agents.answer_bounds import AnswerBounds
from pipelines.kgc.agents.expert_role import ExpertRole, Extraction, choice, json_object
from pipelines.kgc.schema import Schema, Triple


class RETriple(BaseModel):
    head: str
    relation: str
    tail: str


class REAnswer(BaseModel):
    reason: str = ""
    triples: list[RETriple]


class REExpert(ExpertRole):
    task = "re"
    template = "re_expert"
    display = {"en": "RE expert agent", "zh": "关系抽取专家智能体"}
    answer_model = REAnswer
    items_key = "triples"
    example = '{"reason": "...", "triples": [{"head": "...", "relation": "...", "tail": "..."}]}'
    format_hint = "[(head entity, relation type, tail entity), ...]"

    def types_text(self, schema: Schema) -> str:
        """``[rel: [Head, Tail], ...]``."""
        return "[" + ", ".join(f"{r}: [{h}, {t}]" for r, (h, t) in schema.relations.items()) + "]"

    def item_schema(
        self, schema: Schema | None, types: list[str], *, span: dict, label: dict, bounds: AnswerBounds
    ) -> dict[str, Any]:
        return json_object({"head": span, "relation": choice(types, label), "tail": span})

    def from_model(self, answer: BaseModel) -> Extraction:
        items = [Triple(t.head.strip(), t.relation.strip(), t.tail.strip()) for t in answer.triples]
        return Extraction(items, answer.reason.strip())

    def item_json(self, item: Triple) -> dict[str, Any]:
        return {"head": item.head, "relation": item.relation, "tail": item.tail}

    def item_text(self, item: Triple) -> str:
        return f"({item.head}, {item.relation}, {item.tail})"

    def fit(self, item: Triple, schema: Schema) -> tuple[Triple | None, int]:
        return (item if item.relation in schema.relations else None), 0

    def spans(self, item: Triple) -> list[str]:
        return [item.head, item.tail]

    def item_type(self, item: Triple) -> str:
        return item.relation

    def tuple_item(self, parts: list[str], schema: Schema | None) -> Triple | None:
        """``(head, relation, tail)``; with more fields, the first that is a relation of ``schema``
        splits them (spans that hold commas), else None."""
        if len(parts) < 3 or not all(parts):
            return None
        if len(parts) > 3 and schema is not None:
            for index in range(1, len(parts) - 1):
                if parts[index] in schema.relations:
                    return Triple(", ".join(parts[:index]), parts[index], ", ".join(parts[index + 1 :]))
        if len(parts) > 3:
            return None
        return Triple(*parts)

    def table_item(self, cells: list[str], schema: Schema | None) -> Triple | None:
        return self.tuple_item(cells, schema) if len(cells) == 3 else None


RE_EXPERT = REExpert()
