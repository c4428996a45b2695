"""The EE expert: its exact prompts (en json without background, zh collaboration round), its parser
on the paper's records, tables and JSON, its answer text, schema filter and bounded answer schema
(each event type with its own roles)."""

from __future__ import annotations

import pytest

from pipelines.agents import ParseError
from pipelines.kgc.agents.ee_expert import EE_EXPERT
from pipelines.kgc.agents.experts import make_expert
from pipelines.kgc.schema import Argument, Event, Schema, load_schema
from tests.kgc.agents.golden_prompts import assert_golden, rendered
from tests.kgc.agents.test_answer_bounds import ACE, SMALL

CASES = {
    "ee_en_json_nobackground": (
        Schema("tiny_ee", "ee", "en", events={"Life:Be-Born": ("Person", "Time", "Place")}),
        dict(text="Messi was born in 1987 .", language="en", mode="json", background=False, type_names=True),
    ),
    "ee_zh_round1": (
        Schema("duee1", "ee", "zh", events={"人生-出生": ("时间", "地点", "出生者")}),
        dict(
            text="1987年梅西出生于罗萨里奥。",
            language="zh",
            round=1,
            last_answer="[{Trigger Type: 人生-出生, Trigger Word: 出生, Arguments: [(出生者, 梅西)]}]",
            peers=[{"name": "命名实体识别专家智能体", "answer": "[(PER, 梅西), (LOC, 罗萨里奥)]"}],
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_exact_rendered_prompt(case):
    schema, call = CASES[case]
    assert_golden(case, rendered("ee", schema, call))


def test_ee_records_in_the_papers_format():
    reply = (
        "[{Trigger Type: Conflict:Attack, Trigger Word: taken over, "
        "Arguments: (Attacker, Israeli troops),(Target: the border)}, "
        "{Trigger Type: Movement:Transport, Trigger Word: return, Arguments: [(Destination, border)]}, "
        "{Arguments: (x, y)}]"
    )
    got = EE_EXPERT.parse_text(reply)
    assert got.items == [
        Event(
            "Conflict:Attack", "taken over", (Argument("Attacker", "Israeli troops"), Argument("Target", "the border"))
        ),
        Event("Movement:Transport", "return", (Argument("Destination", "border"),)),
    ]
    assert got.malformed == 1


def test_markdown_table():
    ee = "| event type | trigger | role | argument |\n|-|-|-|-|\n"
    ee += "| Life:Be-Born | Born | Person | Messi |\n| Life:Be-Born | Born | Time | 1987 |"
    assert EE_EXPERT.parse_text(ee).items == [
        Event("Life:Be-Born", "Born", (Argument("Person", "Messi"), Argument("Time", "1987")))
    ]


def test_json_mode():
    got = EE_EXPERT.parse_json(
        '{"events": [{"event_type": "Life:Be-Born", "trigger": "Born", '
        '"arguments": [{"role": "Time", "text": "1987"}]}]}',
    )
    assert got.items == [Event("Life:Be-Born", "Born", (Argument("Time", "1987"),))]


@pytest.mark.parametrize("mode", ["text", "json"])
def test_answer_text_round_trips(mode):
    items = [Event("Life:Be-Born", "Born", (Argument("Person", "Lionel Messi"), Argument("Time", "1987")))]
    text = EE_EXPERT.answer_text(items, mode=mode)
    parsed = EE_EXPERT.parse_json(text) if mode == "json" else EE_EXPERT.parse_text(text, load_schema("nyt11_hrl"))
    assert parsed.items == items


def test_schema_filter_drops_and_counts():
    events = [
        Event("Life:Be-Born", "Born", (Argument("Person", "Messi"), Argument("Victim", "x"))),
        Event("Life:Party", "party"),
        Event("Life:Be-Born", "Born", (Argument("Person", "Messi"),)),
    ]
    kept, dropped = EE_EXPERT.schema_filter(events, load_schema("ace05"))
    assert kept == [Event("Life:Be-Born", "Born", (Argument("Person", "Messi"),))] and dropped == 2


def test_each_event_type_admits_only_its_roles():
    branches = EE_EXPERT.answer_schema(ACE, bounds=SMALL)["properties"]["events"]["items"]["anyOf"]
    got = {
        b["properties"]["event_type"]["const"]: b["properties"]["arguments"]["items"]["properties"]["role"]["enum"]
        for b in branches
    }
    assert got == {"Life:Be-Born": ["Person", "Time", "Place"], "Conflict:Attack": ["Attacker", "Target"]}
    assert all(b["properties"]["arguments"]["maxItems"] == 1 for b in branches)
    assert all(b["properties"]["trigger"]["minLength"] == 1 for b in branches)


def test_bounded_replies_parse_and_ungrounded_spans_are_counted():
    agent = make_expert("ee", ACE, bounds=SMALL, reason=True)
    reply = '{"reason": "born", "events": [{"event_type": "Life:Be-Born", "trigger": "born", "arguments": []}]}'
    assert agent.parse(reply, "json").items == [Event("Life:Be-Born", "born")]
    assert agent.parse('{"events": []}', "json").items == []  # a round-0 form parses too
    with pytest.raises(ParseError):
        agent.parse('{"reason": "cut off before the events', "json", truncated=True)
    text = "Messi was born in  Rosario in 1987 ."
    events = [Event("Life:Be-Born", "born", (Argument("Time", "1987"),)), Event("X", "born", (Argument("T", "x"),))]
    assert EE_EXPERT.ungrounded(events, text) == 1
