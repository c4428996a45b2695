"""The task planner (``pipelines/tagging/agents/planner.py``): its rendered prompts, the worked
examples it is shown, and its parsers on clean, noisy, typed-heading, too long and cut replies."""

import numpy as np
import pytest

from pipelines.agents import ParseError
from pipelines.tagging.agents.planner import SubConstraint, make_planner, parse_plan
from pipelines.tagging.agents.worked_examples import PlannerExamples
from tests.tagging.agents.prompt_cases import TEXT, assert_golden, rendered_role


def test_planner_prompts_match_golden():
    assert_golden(rendered_role("planner"))


def test_planner_prompt_spot_check_independent_of_golden():
    assert rendered_role("planner")["planner.zh"][1]["content"] == "定义：两位数乘一位数。"


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
        vocab = sorted({w for t in texts for w in t.split()})
        return np.array([[float(w in t.split()) for w in vocab] for t in texts])

    nearest = PlannerExamples(k=2, strategy="nearest", embed=embed)
    reciprocal = next(e for e in nearest.by_language[lang] if "1" not in e.definition and len(e.constraints) == 1)
    assert nearest.for_definition(reciprocal.definition, lang)[0] is reciprocal


def test_plan_clean_and_noisy():
    clean = "<semantic> Does the question ask for a product?\n<numerical> Is the first factor between 10 and 99?"
    assert parse_plan(clean).constraints == [
        SubConstraint("semantic", "Does the question ask for a product?"),
        SubConstraint("numerical", "Is the first factor between 10 and 99?"),
    ]
    noisy = (
        "Sure! Here is the plan:\n1. **[Semantic]** Does the question ask for a product?\n"
        "2) numerical: Is the first factor between 10 and 99?\n- <NUMERICAL> Is the first factor between 10 and 99?\n"
        "Hope this helps.\n"
    )
    plan = parse_plan(noisy)
    assert [(c.kind, c.text) for c in plan.constraints] == [
        ("semantic", "Does the question ask for a product?"),
        ("numerical", "Is the first factor between 10 and 99?"),
    ]
    zh = "<语义> 题目是否要求计算乘积？\n【数值】第一个因数是否是两位数？"
    assert [c.kind for c in parse_plan(zh).constraints] == ["semantic", "numerical"]
    many = "\n".join(f"<semantic> Does it satisfy condition {i}?" for i in range(9))
    assert len(parse_plan(many, max_constraints=4).constraints) == 4


# issue 11, defect 2: only typed lines are sub-constraints; truncation is counted
@pytest.mark.parametrize(
    "heading",
    [
        "Numerical constraints:",
        "Semantically, the question should be about products.",
        "**Semantic sub-constraints**",
        "Numerical:",
        "数值约束：",
    ],
)
def test_plan_headings_are_not_sub_constraints(heading):
    reply = f"{heading}\n<semantic> Does the question ask for a product?\n<numerical> Is the first factor below 100?"
    plan = parse_plan(reply, max_constraints=2)
    assert [c.text for c in plan.constraints] == [
        "Does the question ask for a product?",
        "Is the first factor below 100?",
    ]
    assert plan.truncated == 0


def test_plan_truncation_is_counted():
    many = "\n".join(f"<semantic> Does it satisfy condition {i}?" for i in range(9))
    plan = parse_plan(many, max_constraints=4)
    assert len(plan.constraints) == 4 and plan.truncated == 5
    assert parse_plan("Semantic: Does it ask for a sum?\n- numerical - Is the sum below 20?").truncated == 0


def test_plan_json_clean_noisy_and_bounded():
    planner = make_planner(max_constraints=2)
    clean = (
        '{"constraints": [{"kind": "semantic", "text": "Does the question ask for a product?"},'
        ' {"kind": "numerical", "text": "Is the first factor between 10 and 99?"}]}'
    )
    assert planner.parse(clean, "json").constraints == [
        SubConstraint("semantic", "Does the question ask for a product?"),
        SubConstraint("numerical", "Is the first factor between 10 and 99?"),
    ]
    noisy = "Here it is:\n```json\n" + clean + "\n```"
    assert len(planner.parse(noisy, "json").constraints) == 2
    assert planner.json_schema["properties"]["constraints"]["maxItems"] == 2
    with pytest.raises(ParseError, match="constraints.0.kind"):
        planner.parse('{"constraints": [{"kind": "visual", "text": "Is it red?"}]}', "json")
    with pytest.raises(ParseError):
        planner.parse('{"constraints": []}', "json")


def test_plan_json_cut_by_max_tokens_keeps_its_complete_sub_constraints():
    cut_plan = '{"constraints": [{"kind": "semantic", "text": "Does it multiply?"}, {"kind": "nume'
    plan = make_planner().parse(cut_plan, "json", truncated=True)
    assert plan.constraints == [SubConstraint("semantic", "Does it multiply?")]
    with pytest.raises(ParseError):
        make_planner().parse(cut_plan, "json")  # not cut by the length limit: malformed
