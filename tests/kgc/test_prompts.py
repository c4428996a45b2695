"""Exact rendered prompts of the experts (en, zh; round 0 and a collaboration round; text and json
mode) against reviewed golden files, and the shared system text across samples.

Regenerate after a deliberate template change: ``KGC_UPDATE_GOLDEN=1 pytest tests/kgc/test_prompts.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipelines.kgc.agents.experts import expert_vars, make_expert
from pipelines.kgc.schema import Schema, load_schema

GOLDEN = Path(__file__).parent / "golden"
DUEE = Schema("duee1", "ee", "zh", events={"人生-出生": ("时间", "地点", "出生者")})

CASES = {
    "ner_en_round0": ("ner", load_schema("conllpp"), dict(text="EU rejects German call .", language="en")),
    "re_en_round1_demo": (
        "re",
        Schema("tiny_re", "re", "en", relations={"per:date_of_birth": ("PERSON", "DATE")}),
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
    "ee_en_json_nobackground": (
        "ee",
        Schema("tiny_ee", "ee", "en", events={"Life:Be-Born": ("Person", "Time", "Place")}),
        dict(text="Messi was born in 1987 .", language="en", mode="json", background=False, type_names=True),
    ),
    "re_en_json_round1": (
        "re",
        Schema("tiny_re", "re", "en", relations={"per:date_of_birth": ("PERSON", "DATE")}),
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
    "ner_zh_round0": ("ner", load_schema("msra"), dict(text="王小明在北京工作。", language="zh")),
    "ee_zh_round1": (
        "ee",
        DUEE,
        dict(
            text="1987年梅西出生于罗萨里奥。",
            language="zh",
            round=1,
            last_answer="[{Trigger Type: 人生-出生, Trigger Word: 出生, Arguments: [(出生者, 梅西)]}]",
            peers=[{"name": "命名实体识别专家智能体", "answer": "[(PER, 梅西), (LOC, 罗萨里奥)]"}],
        ),
    ),
}


def rendered(case: str) -> str:
    task, schema, kw = CASES[case]
    kw = dict(kw)
    mode = kw.pop("mode", "text")
    vars = expert_vars(schema, **kw)
    messages = make_expert(task, schema).render(vars.pop("language"), output_mode=mode, **vars)
    return json.dumps(messages, ensure_ascii=False, indent=1) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_exact_rendered_prompt(case):
    path = GOLDEN / f"{case}.json"
    text = rendered(case)
    if os.environ.get("KGC_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_system_text_is_byte_identical_across_sentences_and_rounds():
    schema = load_schema("nyt11_hrl")
    agent = make_expert("re", schema)
    systems = set()
    for text, round in (("A b .", 0), ("C d .", 0), ("C d .", 3)):
        vars = expert_vars(schema, text=text, language="en", round=round, last_answer="NO", peers=[])
        systems.add(agent.render("en", **{k: v for k, v in vars.items() if k != "language"})[0]["content"])
    assert len(systems) == 1


def test_opening_statement_and_three_sentences_of_the_task_definition():
    schema = load_schema("nyt11_hrl")
    vars = expert_vars(schema, text="x", language="en")
    system = make_expert("re", schema).render("en", **{k: v for k, v in vars.items() if k != "language"})[0]["content"]
    assert system.startswith("You are a knowledge graph constructor, need to synthesise relation extraction agent")
    assert "You are an excellent expert in relation extraction. The relation extraction task is given a list" in system
    assert system.endswith(
        "The list of constrained relations is: [/location/location/contains: [LOCATION, LOCATION], "
        + ", ".join(f"{r}: [{h}, {t}]" for r, (h, t) in list(schema.relations.items())[1:])
        + "]"
    )
