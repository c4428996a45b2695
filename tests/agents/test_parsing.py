"""The shared reply parsers' JSON readers: strict JSON first, then a lenient reader (Hjson) for the
near-JSON small models write; truncated replies read by pydantic_core's partial JSON."""

from __future__ import annotations

import pytest

from pipelines.agents.agent import ParseError
from pipelines.agents.parsing import json_object, truncated_json_objects


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"reply": "it\'s fine",}', {"reply": "it's fine"}),  # the quote swap broke the apostrophe
        ("{'reply': 'fine', 'n': 2}", {"reply": "fine", "n": 2}),
        ('Sure! ```json\n{"a": [1, 2,], "b": "x"}\n``` hope it helps', {"a": [1, 2], "b": "x"}),
        ('{"reply": "say \\"hi\\"", "ok": true, "none": null}', {"reply": 'say "hi"', "ok": True, "none": None}),
        ('{"analysis": "a, b", "reply": "c"}', {"analysis": "a, b", "reply": "c"}),
    ],
)
def test_json_object_reads_json_and_near_json(reply: str, expected: dict) -> None:
    value = json_object(reply)
    assert value == expected and type(value) is dict


def test_json_object_refuses_text_without_an_object() -> None:
    with pytest.raises(ParseError, match="no JSON object found"):
        json_object("I think the answer is yes.")


def test_truncated_replies_give_their_complete_prefixes_longest_first() -> None:
    objects = list(truncated_json_objects('{"items": [{"type": "PER", "span": "Ann"}, {"type": "LOC", "sp'))
    assert objects[0] == {"items": [{"type": "PER", "span": "Ann"}, {"type": "LOC"}]}  # the cut key is dropped
    assert {"items": [{"type": "PER", "span": "Ann"}]} in objects
    assert next(truncated_json_objects('{"reply": "half a sent')) == {"reply": "half a sent"}
