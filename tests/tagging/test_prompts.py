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
from pipelines.tagging.agents.worked_examples import PlannerExamples, SemanticExamples
from pipelines.tagging.numerical import ConstraintOutcome
from pipelines.tagging.sft import reasoned_verdict
from pipelines.tagging.team import TeamVerdict

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


OTHER_CONCEPT = {  # a demonstration of another concept (few rows per concept) shows its own definition
    "en": [{"definition": "Addition within 100.", "question": "What is 40 + 7?", "label": 1, "rationale": None}],
    "zh": [{"definition": "100 以内的加法。", "question": "40 + 7 等于多少？", "label": 1, "rationale": None}],
}
PLANNER_EXAMPLES = {lang: PlannerExamples(k=2, seed=0).for_definition("", lang) for lang in ("en", "zh")}
WRITER = {
    lang: {**{k: TEXT[lang][k] for k in ("definition", "question", "constraint")}, "variables": "first_factor = 47"}
    for lang in ("en", "zh")
}


def _shipped(lang):
    """The semantic judge's examples from the shipped file, as the team passes them."""
    from pipelines.tagging.team import semantic_examples

    return semantic_examples([], SemanticExamples().pair_for(TEXT[lang]["definition"], lang), TEXT[lang]["definition"])


SHIPPED = {lang: _shipped(lang) for lang in ("en", "zh")}


def cases(lang):
    t = TEXT[lang]
    return {
        "planner": (make_planner(), {"definition": t["definition"], "examples": PLANNER_EXAMPLES[lang]}),
        "solver": (make_solver(), {"question": t["question"]}),
        "semantic_judge": (make_semantic_judge(), {**t, "demonstrations": DEMOS[lang]}),
        "semantic_judge_no_demos": (make_semantic_judge(), {**t, "demonstrations": []}),
        "semantic_judge_other_concept": (make_semantic_judge(), {**t, "demonstrations": OTHER_CONCEPT[lang]}),
        "semantic_judge_shipped_examples": (make_semantic_judge(), {**t, "demonstrations": SHIPPED[lang]}),
        "arg_extractor": (
            make_arg_extractor(),
            {k: t[k] for k in ("definition", "constraint", "question", "solution")},
        ),
        "program_writer": (make_program_writer(), {**WRITER[lang], "program": "python"}),
        "program_writer_comparisons": (make_program_writer("comparisons"), {**WRITER[lang], "program": "comparisons"}),
        "single_llm": (
            make_single_llm(),
            {"definition": t["definition"], "question": t["question"], "demonstrations": DEMOS[lang]},
        ),
        "single_llm_other_concept": (
            make_single_llm(),
            {"definition": t["definition"], "question": t["question"], "demonstrations": OTHER_CONCEPT[lang]},
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
        "Definition: Multiplying a two-digit number by a one-digit number.\n"
        "Question: A box holds 47 pens. How many pens are in 6 boxes?\n"
        "Variables:\nfirst_factor = 47\nSub-constraint: Is the first factor a two-digit number?"
    )
    python, comparisons = (
        r["program_writer.json.en"][0]["content"],
        r["program_writer_comparisons.json.en"][0]["content"],
    )
    assert '{"code": "print(first_number + second_number <= 20)"}' in python and '"comparisons"' not in python
    assert '{"comparisons": [{"left": "first_number + second_number"' in comparisons
    assert r["arg_extractor.en"][1]["content"].startswith(
        "Definition: Multiplying a two-digit number by a one-digit number.\nSub-constraint: "
    )
    shipped = r["semantic_judge_shipped_examples.en"][1]["content"]
    assert "Example sub-constraint: Does the question ask" in shipped
    assert shipped.count("Example judgment: ") == 2 and shipped.count("Example sub-constraint: ") == 1
    assert shipped.rstrip().endswith("Sub-constraint: Is the first factor a two-digit number?")
    assert "two examples" in r["semantic_judge_shipped_examples.en"][0]["content"]
    assert "two examples" not in r["semantic_judge_no_demos.en"][0]["content"]  # said only when shown
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
    assert (
        "\n\nExample definition: Addition within 100.\nExample question: What is 40 + 7?\nExample judgment: <Yes>\n"
        in (r["semantic_judge_other_concept.en"][1]["content"])
    )
    assert (
        "\n\nDefinition: Addition within 100.\nQuestion: What is 40 + 7?\nReasoning:"
        in (r["single_llm_other_concept.en"][1]["content"])
    )
    assert (
        "示例定义：100 以内的加法。\n示例题目：40 + 7 等于多少？" in r["semantic_judge_other_concept.zh"][1]["content"]
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
    """Every sample variable changed, the system text stays (``program`` is the run's form, not a sample's)."""
    for name, (agent, vars) in cases(lang).items():
        other = {k: (v + " changed" if isinstance(v, str) and k != "program" else v) for k, v in vars.items()}
        assert agent.render(lang, **vars)[0] == agent.render(lang, **other)[0], name
        assert agent.render(lang, output_mode="json", **vars)[0] == agent.render(lang, output_mode="json", **other)[0]


# issue 11, defect 5: the planner shows worked examples (demos.k of them), chosen like the other demonstrations
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_planner_prompt_shows_two_examples_chosen_by_the_demonstration_strategy(lang):

    examples = PlannerExamples(k=2, strategy="random", seed=0)
    chosen = examples.for_definition(TEXT[lang]["definition"], lang)
    assert len(chosen) == 2 and all(e.language == lang for e in chosen)
    assert examples.for_definition("another definition", lang) == chosen  # same system prompt for all
    system = make_planner().render(lang, definition=TEXT[lang]["definition"], examples=chosen)[0]["content"]
    assert all(e.definition in system for e in chosen)
    assert system.count("<semantic>") >= 3  # the format line and one per example at least
    assert PlannerExamples(k=2, seed=5).for_definition("x", lang) != chosen or len(examples.by_language[lang]) == 2

    def embed(texts):  # similarity = shared words with the first text (a stand-in embedding)
        import numpy as np

        vocab = sorted({w for t in texts for w in t.split()})
        return np.array([[float(w in t.split()) for w in vocab] for t in texts])

    nearest = PlannerExamples(k=2, strategy="nearest", embed=embed)
    reciprocal = next(e for e in nearest.by_language[lang] if "1" not in e.definition and len(e.constraints) == 1)
    assert nearest.for_definition(reciprocal.definition, lang)[0] is reciprocal
