"""``strict_allowed``: OpenAI's strict mode needs every object closed with all its properties
required, wherever the object sits (nested, in a list, under ``anyOf``); long enums of strings are
passed over at C speed and never hide an object beside them."""

from __future__ import annotations

from pipelines.llm.openai_protocol import strict_allowed


def closed_object(**properties):
    return {"type": "object", "properties": properties, "required": sorted(properties), "additionalProperties": False}


SPANS = [f"span {i}" for i in range(1000)]


def test_closed_objects_with_long_enums_are_strict():
    entity = closed_object(name={"type": "string", "enum": SPANS}, type={"enum": ["PER", "LOC", 3, 1.5, True, None]})
    schema = closed_object(items={"type": "array", "items": entity}, kinds={"anyOf": [entity, {"type": "null"}]})
    assert strict_allowed(schema) is True


def test_an_open_object_anywhere_is_not_strict():
    open_entity = {"type": "object", "properties": {"name": {"enum": SPANS}}, "required": ["name"]}
    assert strict_allowed(closed_object(items={"type": "array", "items": open_entity})) is False
    missing = {**closed_object(a={"type": "string"}, b={"type": "string"}), "required": ["a"]}
    assert strict_allowed(closed_object(x={"anyOf": [missing]})) is False
    # an object inside an enum's list, beside its strings, is still looked at
    assert strict_allowed(closed_object(x={"enum": [*SPANS, {"type": "object", "properties": {}}]})) is False
    assert strict_allowed({"type": "array", "items": closed_object()}) is False  # not an object at the root
