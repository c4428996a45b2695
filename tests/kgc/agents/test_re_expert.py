"""The RE expert: its exact prompts (round 0 and a collaboration round; text and json mode) against
reviewed golden files, the shared system text across samples, its parser on tuples, tables and JSON,
its answer text, schema filter and bounded answer schema."""

from __future__ import annotations

import pytest

from pipelines.agents import ParseError
from pipelines.kgc.agents.experts import expert_vars, make_expert
from pipelines.kgc.agents.re_expert import RE_EXPERT
from pipelines.kgc.schema import Schema, Triple, load_schema
from tests.kgc.agents.golden_prompts import assert_golden, rendered
from tests.kgc.agents.test_answer_bounds import SMALL

NYT = load_schema("nyt11_hrl")
TINY_RE = Schema("tiny_re", "re", "en", relations={"per:date_of_birth": ("PERSON", "DATE")})
CASES = {
    "re_en_round1_demo": (
        TINY_RE,
        dict(
            text="Born in 1987 Lionel Messi plays football .",
            language="en",
            demonstrations=[{"text": "Anna was born in 1950 .", "answer": "[(Anna, per:date_of_birth, 1950)]"}],
            round=1,
            last_answer="NO",
            peers=[
                {"name": "NER expert agent", "answer": "[(PER, Lionel Messi)]"},
                {"name": "EE expert agent", "answer": "NO"},
            ],
        ),
    ),
    "re_en_json_round1": (
        TINY_RE,
        dict(
            text="Born in 1987 Lionel Messi plays football .",
            language="en",
            mode="json",
            type_names=True,
            round=1,
            last_answer='{"triples": []}',
            peers=[{"name": "NER expert agent", "answer": '{"entities": [{"type": "PER", "text": "Lionel Messi"}]}'}],
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_exact_rendered_prompt(case):
    schema, call = CASES[case]
    assert_golden(case, rendered("re", schema, call))


def test_system_text_is_byte_identical_across_sentences_and_rounds():
    agent = make_expert("re", NYT)
    systems = set()
    for text, round in (("A b .", 0), ("C d .", 0), ("C d .", 3)):
        vars = expert_vars(NYT, text=text, language="en", round=round, last_answer="NO", peers=[])
        systems.add(agent.render("en", **{k: v for k, v in vars.items() if k != "language"})[0]["content"])
    assert len(systems) == 1


def test_opening_statement_and_three_sentences_of_the_task_definition():
    vars = expert_vars(NYT, text="x", language="en")
    system = make_expert("re", NYT).render("en", **{k: v for k, v in vars.items() if k != "language"})[0]["content"]
    assert system.startswith("You are a knowledge graph constructor, need to synthesise relation extraction agent")
    assert "You are an excellent expert in relation extraction. The relation extraction task is given a list" in system
    assert system.endswith(
        "The list of constrained relations is: [/location/location/contains: [LOCATION, LOCATION], "
        + ", ".join(f"{r}: [{h}, {t}]" for r, (h, t) in list(NYT.relations.items())[1:])
        + "]"
    )


def test_re_tuples_with_commas_in_spans_resolved_by_the_schema():
    reply = "[(Argentina, /location/location/contains, Rosario, Santa Fe), (Rosario, Argentina)]"
    got = RE_EXPERT.parse_text(reply, NYT)
    assert got.items == [Triple("Argentina", "/location/location/contains", "Rosario, Santa Fe")]
    assert got.malformed == 1


def test_partial_reply_keeps_complete_tuples():
    got = RE_EXPERT.parse_text("[(France, /location/country/capital, Paris), (Spain, /location/coun", NYT)
    assert got.items == [Triple("France", "/location/country/capital", "Paris")]


def test_markdown_table():
    re_table = "| head | relation | tail |\n| --- | --- | --- |\n| France | /location/country/capital | Paris |"
    assert RE_EXPERT.parse_text(re_table).items == [Triple("France", "/location/country/capital", "Paris")]


def test_json_in_text_mode_and_a_truncated_json_reply():
    triple = '{"head": "France", "relation": "/location/country/capital", "tail": "Paris"}'
    reply = '```json\n{"reason": "r", "triples": [' + triple + "]}\n```"
    assert RE_EXPERT.parse_text(reply).items == [Triple("France", "/location/country/capital", "Paris")]
    with pytest.raises(ParseError):
        RE_EXPERT.parse_json('{"triples": [{"head": "a", "relation": "b", "ta')  # truncated


@pytest.mark.parametrize("mode", ["text", "json"])
def test_answer_text_round_trips(mode):
    items = [Triple("Lionel Messi", "/people/person/place_of_birth", "Rosario")]
    text = RE_EXPERT.answer_text(items, mode=mode)
    parsed = RE_EXPERT.parse_json(text) if mode == "json" else RE_EXPERT.parse_text(text, NYT)
    assert parsed.items == items


def test_schema_filter_drops_and_counts():
    triples = [Triple("a", "/people/person/nationality", "b"), Triple("a", "likes", "b")]
    kept, dropped = RE_EXPERT.schema_filter(triples, NYT)
    assert len(kept) == 1 and dropped == 1


def test_schema_bounds_relations_and_spans():
    triple = RE_EXPERT.answer_schema(NYT, bounds=SMALL)["properties"]["triples"]["items"]
    assert triple["properties"]["relation"]["enum"] == list(NYT.relations)
    assert triple["properties"]["head"]["maxLength"] == triple["properties"]["tail"]["maxLength"] == 8
    assert RE_EXPERT.json_example(reason=True).startswith('{"reason": "...", "triples"')


def test_ungrounded_spans_are_counted():
    text = "Messi was born in  Rosario in 1987 ."
    triples = [Triple("Messi", "born_in", "rosario"), Triple("<head entity>", "r", "Messi")]
    assert RE_EXPERT.ungrounded(triples, text) == 1
