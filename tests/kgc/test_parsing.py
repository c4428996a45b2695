"""Parsers on tuples, tables, JSON, partial and garbage replies; answer text; schema filter."""

from __future__ import annotations

import pytest

from pipelines.agents import ParseError
from pipelines.kgc.parsing import answer_text, parse_json_answer, parse_text_answer, schema_filter
from pipelines.kgc.schema import Argument, Entity, Event, Triple, load_schema

NYT = load_schema("nyt11_hrl")
ACE = load_schema("ace05")


def test_ner_tuples_with_reasons_and_answer_line():
    reply = "Considering the RE expert (Messi, born, 1987), 1987 is a date.\n"
    reply += "Answer: [(PER, Lionel Messi), (LOC, 'Rosario')]"
    got = parse_text_answer("ner", reply)
    assert got.items == [Entity("PER", "Lionel Messi"), Entity("LOC", "Rosario")]
    assert got.reason.startswith("Considering the RE expert")


def test_ner_span_first_is_swapped_by_schema_and_chinese_commas():
    got = parse_text_answer("ner", "[(Lionel Messi, PER)，（北京, LOC)]", load_schema("conllpp"))
    assert got.items == [Entity("PER", "Lionel Messi")]
    got = parse_text_answer("ner", "[(LOC，北京), (PER，王小明)]", load_schema("msra"))
    assert got.items == [Entity("LOC", "北京"), Entity("PER", "王小明")]


def test_re_tuples_with_commas_in_spans_resolved_by_the_schema():
    reply = "[(Argentina, /location/location/contains, Rosario, Santa Fe), (Rosario, Argentina)]"
    got = parse_text_answer("re", reply, NYT)
    assert got.items == [Triple("Argentina", "/location/location/contains", "Rosario, Santa Fe")]
    assert got.malformed == 1


def test_partial_reply_keeps_complete_tuples():
    got = parse_text_answer("re", "[(France, /location/country/capital, Paris), (Spain, /location/coun", NYT)
    assert got.items == [Triple("France", "/location/country/capital", "Paris")]


def test_no_answer_is_empty_not_an_error():
    assert parse_text_answer("re", "NO").items == []
    assert parse_text_answer("ner", "Reasons: nothing here.\nAnswer: NO").items == []
    assert parse_text_answer("ee", "答案：无").items == []


def test_markdown_tables():
    ner = "| Entity type | Entity |\n|---|---|\n| PER | Lionel Messi |\n| LOC | Rosario |"
    assert parse_text_answer("ner", ner).items == [Entity("PER", "Lionel Messi"), Entity("LOC", "Rosario")]
    re_table = "| head | relation | tail |\n| --- | --- | --- |\n| France | /location/country/capital | Paris |"
    assert parse_text_answer("re", re_table).items == [Triple("France", "/location/country/capital", "Paris")]
    ee = "| event type | trigger | role | argument |\n|-|-|-|-|\n"
    ee += "| Life:Be-Born | Born | Person | Messi |\n| Life:Be-Born | Born | Time | 1987 |"
    assert parse_text_answer("ee", ee).items == [
        Event("Life:Be-Born", "Born", (Argument("Person", "Messi"), Argument("Time", "1987")))
    ]


def test_ee_records_in_the_papers_format():
    reply = (
        "[{Trigger Type: Conflict:Attack, Trigger Word: taken over, "
        "Arguments: (Attacker, Israeli troops),(Target: the border)}, "
        "{Trigger Type: Movement:Transport, Trigger Word: return, Arguments: [(Destination, border)]}, "
        "{Arguments: (x, y)}]"
    )
    got = parse_text_answer("ee", reply)
    assert got.items == [
        Event(
            "Conflict:Attack", "taken over", (Argument("Attacker", "Israeli troops"), Argument("Target", "the border"))
        ),
        Event("Movement:Transport", "return", (Argument("Destination", "border"),)),
    ]
    assert got.malformed == 1


def test_json_in_text_mode_and_json_mode():
    triple = '{"head": "France", "relation": "/location/country/capital", "tail": "Paris"}'
    reply = '```json\n{"reason": "r", "triples": [' + triple + "]}\n```"
    assert parse_text_answer("re", reply).items == [Triple("France", "/location/country/capital", "Paris")]
    got = parse_json_answer(
        "ee",
        '{"events": [{"event_type": "Life:Be-Born", "trigger": "Born", '
        '"arguments": [{"role": "Time", "text": "1987"}]}]}',
    )
    assert got.items == [Event("Life:Be-Born", "Born", (Argument("Time", "1987"),))]
    assert parse_json_answer("ner", '{"reason": "none", "entities": []}').items == []
    with pytest.raises(ParseError, match="ner schema"):
        parse_json_answer("ner", '{"entities": [{"type": "PER"}]}')
    with pytest.raises(ParseError):
        parse_json_answer("re", '{"triples": [{"head": "a", "relation": "b", "ta')  # truncated


@pytest.mark.parametrize("task", ["ner", "re", "ee"])
@pytest.mark.parametrize("garbage", ["I like football.", "((((", "{}", "| a |", "Answer:"])
def test_garbage_raises_parse_error(task, garbage):
    with pytest.raises(ParseError):
        parse_text_answer(task, garbage)


@pytest.mark.parametrize(
    "task,items",
    [
        ("ner", [Entity("PER", "Lionel Messi"), Entity("LOC", "Rosario")]),
        ("re", [Triple("Lionel Messi", "/people/person/place_of_birth", "Rosario")]),
        ("ee", [Event("Life:Be-Born", "Born", (Argument("Person", "Lionel Messi"), Argument("Time", "1987")))]),
    ],
)
@pytest.mark.parametrize("mode", ["text", "json"])
def test_answer_text_round_trips(task, items, mode):
    text = answer_text(task, items, mode=mode)
    parsed = parse_json_answer(task, text) if mode == "json" else parse_text_answer(task, text, NYT)
    assert parsed.items == items


def test_schema_filter_drops_and_counts():
    events = [
        Event("Life:Be-Born", "Born", (Argument("Person", "Messi"), Argument("Victim", "x"))),
        Event("Life:Party", "party"),
        Event("Life:Be-Born", "Born", (Argument("Person", "Messi"),)),
    ]
    kept, dropped = schema_filter("ee", events, ACE)
    assert kept == [Event("Life:Be-Born", "Born", (Argument("Person", "Messi"),))] and dropped == 2
    kept, dropped = schema_filter(
        "re", [Triple("a", "/people/person/nationality", "b"), Triple("a", "likes", "b")], NYT
    )
    assert len(kept) == 1 and dropped == 1
