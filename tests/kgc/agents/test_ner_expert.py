"""The NER expert: its exact prompts (en, zh), its parser on tuples, tables and JSON, its answer
text and its bounded answer schema."""

from __future__ import annotations

import pytest

from pipelines.agents import ParseError
from pipelines.kgc.agents.experts import make_expert
from pipelines.kgc.agents.ner_expert import NER_EXPERT
from pipelines.kgc.schema import Entity, load_schema
from tests.kgc.agents.golden_prompts import assert_golden, rendered
from tests.kgc.agents.test_answer_bounds import SMALL

CASES = {
    "ner_en_round0": (load_schema("conllpp"), dict(text="EU rejects German call .", language="en")),
    "ner_zh_round0": (load_schema("msra"), dict(text="王小明在北京工作。", language="zh")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_exact_rendered_prompt(case):
    schema, call = CASES[case]
    assert_golden(case, rendered("ner", schema, call))


def test_ner_tuples_with_reasons_and_answer_line():
    reply = "Considering the RE expert (Messi, born, 1987), 1987 is a date.\n"
    reply += "Answer: [(PER, Lionel Messi), (LOC, 'Rosario')]"
    got = NER_EXPERT.parse_text(reply)
    assert got.items == [Entity("PER", "Lionel Messi"), Entity("LOC", "Rosario")]
    assert got.reason.startswith("Considering the RE expert")


def test_ner_span_first_is_swapped_by_schema_and_chinese_commas():
    got = NER_EXPERT.parse_text("[(Lionel Messi, PER)，（北京, LOC)]", load_schema("conllpp"))
    assert got.items == [Entity("PER", "Lionel Messi")]
    got = NER_EXPERT.parse_text("[(LOC，北京), (PER，王小明)]", load_schema("msra"))
    assert got.items == [Entity("LOC", "北京"), Entity("PER", "王小明")]


def test_markdown_table():
    ner = "| Entity type | Entity |\n|---|---|\n| PER | Lionel Messi |\n| LOC | Rosario |"
    assert NER_EXPERT.parse_text(ner).items == [Entity("PER", "Lionel Messi"), Entity("LOC", "Rosario")]


def test_json_mode():
    assert NER_EXPERT.parse_json('{"reason": "none", "entities": []}').items == []
    with pytest.raises(ParseError, match="ner schema"):
        NER_EXPERT.parse_json('{"entities": [{"type": "PER"}]}')


@pytest.mark.parametrize("mode", ["text", "json"])
def test_answer_text_round_trips(mode):
    items = [Entity("PER", "Lionel Messi"), Entity("LOC", "Rosario")]
    text = NER_EXPERT.answer_text(items, mode=mode)
    parsed = NER_EXPERT.parse_json(text) if mode == "json" else NER_EXPERT.parse_text(text, load_schema("nyt11_hrl"))
    assert parsed.items == items


def test_schema_bounds_every_string_and_list():
    schema = NER_EXPERT.answer_schema(load_schema("conllpp"), bounds=SMALL, reason=True)
    assert list(schema["properties"]) == ["reason", "entities"] and schema["required"] == ["reason", "entities"]
    assert schema["properties"]["reason"] == {"type": "string", "maxLength": 12}
    entities = schema["properties"]["entities"]
    assert entities["maxItems"] == 2
    item = entities["items"]
    assert item["properties"]["type"] == {"enum": ["PER", "LOC", "ORG", "MISC"]}
    assert item["properties"]["text"] == {"type": "string", "minLength": 1, "maxLength": 8}
    assert item["additionalProperties"] is False and item["required"] == ["type", "text"]
    assert list(NER_EXPERT.answer_schema(load_schema("conllpp"), bounds=SMALL, reason=False)["properties"]) == [
        "entities"
    ]


def test_json_example_and_the_experts_reason_field():
    assert NER_EXPERT.json_example(reason=False) == '{"entities": [{"type": "...", "text": "..."}]}'
    assert list(make_expert("ner", load_schema("conllpp")).json_schema["properties"]) == ["entities"]
    assert list(make_expert("ner", load_schema("conllpp"), reason=True).json_schema["properties"])[0] == "reason"


def test_ungrounded_spans_are_counted():
    text = "Messi was born in  Rosario in 1987 ."
    assert NER_EXPERT.ungrounded([Entity("PER", "messi"), Entity("LOC", "Barcelona")], text) == 1
