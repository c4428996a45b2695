"""Exact rendered prompts of every tagging agent, in English and Chinese.

The expected messages are in ``golden/prompts.json`` (reviewed by hand). After an intended
template change, regenerate with ``EDUMAS_UPDATE_GOLDEN=1 pytest tests/tagging/test_prompts.py``
and review the diff.
"""

import json
import os
from pathlib import Path

import pytest

from pipelines.tagging.agents.numerical_judge import make_arg_extractor, make_program_writer
from pipelines.tagging.agents.planner import make_planner
from pipelines.tagging.agents.semantic_judge import make_semantic_judge
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.agents.solver import make_solver
from pipelines.tagging.sft import reasoned_verdict
from pipelines.tagging.team import ConstraintOutcome, TeamVerdict

GOLDEN = Path(__file__).parent / "golden" / "prompts.json"
DEMOS = {
    "en": [
        {"question": "A box holds 45 pens. How many pens are in 2 boxes?", "label": 1, "rationale": "45 x 2. <Yes>"},
        {"question": "Tom has 72 pens and gets 8 more. How many now?", "label": 0, "rationale": None},
    ],
    "zh": [
        {"question": "每盒有 45 支笔，2 盒有多少支？", "label": 1, "rationale": "45×2。<Yes>"},
        {"question": "小明有 72 支笔，又得到 8 支，现在有多少支？", "label": 0, "rationale": None},
    ],
}
TEXT = {
    "en": {
        "definition": "Multiplying a two-digit number by a one-digit number.",
        "question": "A box holds 47 pens. How many pens are in 6 boxes?",
        "solution": "47 x 6 = 282. Final answer: 282",
        "constraint": "Is the first factor a two-digit number?",
    },
    "zh": {
        "definition": "两位数乘一位数。",
        "question": "每盒有 47 支笔，6 盒有多少支？",
        "solution": "47×6=282。最终答案：282",
        "constraint": "第一个因数是否是两位数？",
    },
}


def cases(lang):
    t = TEXT[lang]
    return {
        "planner": (make_planner(), {"definition": t["definition"]}),
        "solver": (make_solver(), {"question": t["question"]}),
        "semantic_judge": (make_semantic_judge(), {**t, "demonstrations": DEMOS[lang]}),
        "semantic_judge_no_demos": (make_semantic_judge(), {**t, "demonstrations": []}),
        "arg_extractor": (make_arg_extractor(), {k: t[k] for k in ("constraint", "question", "solution")}),
        "program_writer": (make_program_writer(), {"constraint": t["constraint"], "variables": "first_factor = 47"}),
        "single_llm": (
            make_single_llm(),
            {"definition": t["definition"], "question": t["question"], "demonstrations": DEMOS[lang]},
        ),
    }


def rendered():
    out = {}
    for lang in ("en", "zh"):
        for name, (agent, vars) in cases(lang).items():
            out[f"{name}.{lang}"] = agent.render(lang, **vars)
            out[f"{name}.json.{lang}"] = agent.render(lang, output_mode="json", **vars)
        verdict = TeamVerdict(
            False,
            [
                ConstraintOutcome(
                    "semantic", TEXT[lang]["constraint"], True, "semantic_judge", reasoning="It multiplies."
                ),
                ConstraintOutcome(
                    "numerical",
                    TEXT[lang]["constraint"],
                    False,
                    "numerical_judge",
                    arguments="first_factor = 147",
                    program="print(10 <= first_factor <= 99)",
                ),
            ],
        )
        out[f"sft_target.{lang}"] = reasoned_verdict(verdict, lang)
    return out


def test_rendered_prompts_match_golden():
    actual = rendered()
    if os.environ.get("EDUMAS_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(actual, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(actual) == sorted(expected)
    for key in expected:
        assert actual[key] == expected[key], key


def test_spot_checks_independent_of_golden():
    r = rendered()
    assert r["solver.en"][1] == {
        "role": "user",
        "content": "Question: A box holds 47 pens. How many pens are in 6 boxes?",
    }
    assert r["planner.zh"][1]["content"] == "定义：两位数乘一位数。"
    assert r["program_writer.en"][1]["content"] == (
        "Sub-constraint: Is the first factor a two-digit number?\nVariables:\nfirst_factor = 47"
    )
    assert r["single_llm.en"][1]["content"].endswith(
        "Question: Tom has 72 pens and gets 8 more. How many now?\n"
        "Reasoning: The question does not satisfy the definition. <No>\n\n"
        "Question: A box holds 47 pens. How many pens are in 6 boxes?\nReasoning:"
    )
    assert r["semantic_judge_no_demos.en"][1]["content"] == (
        "Definition: Multiplying a two-digit number by a one-digit number.\n\n"
        "Question: A box holds 47 pens. How many pens are in 6 boxes?\n"
        "Solution: 47 x 6 = 282. Final answer: 282\nSub-constraint: Is the first factor a two-digit number?"
    )
    assert r["sft_target.en"].endswith(
        "At least one sub-constraint fails, so the question does not test this knowledge.\n<No>"
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_json_mode_adds_the_schema_to_the_system_text_only(lang):
    r = rendered()
    wording = {"en": "reply with one JSON object that matches this JSON schema", "zh": "只回复一个符合下面 JSON schema"}
    for name, (agent, _) in cases(lang).items():
        text, json_mode = r[f"{name}.{lang}"], r[f"{name}.json.{lang}"]
        assert json_mode[1] == text[1], name  # the sample part is the same
        assert json_mode[0]["content"].startswith(text[0]["content"]), name
        added = json_mode[0]["content"][len(text[0]["content"]) :]
        assert wording[lang] in added and added.endswith(agent.output_schema_text()), name
        assert json.loads(agent.output_schema_text()) == agent.json_schema


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_system_text_is_shared_across_samples(lang):
    for name, (agent, vars) in cases(lang).items():
        other = {k: (v + " changed" if isinstance(v, str) else v) for k, v in vars.items()}
        assert agent.render(lang, **vars)[0] == agent.render(lang, **other)[0], name
        assert agent.render(lang, output_mode="json", **vars)[0] == agent.render(lang, output_mode="json", **other)[0]
