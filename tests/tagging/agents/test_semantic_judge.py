"""The semantic judge (``pipelines/tagging/agents/semantic_judge.py``): its rendered prompts with
and without examples, the examples it is shown (:func:`semantic_examples`), and its parsers on
clean, noisy, json and cut replies (the single-LLM baseline parses with the same ones)."""

import pytest

from pipelines.agents import ParseError
from pipelines.tagging.agents.semantic_judge import make_semantic_judge, parse_judgment, semantic_examples
from pipelines.tagging.agents.worked_examples import SemanticExamples
from pipelines.tagging.data import TaggingExample
from tests.tagging.agents.prompt_cases import assert_golden, rendered_role

DEFINITION = "Multiplying a two-digit number by a one-digit number."


def test_semantic_judge_prompts_match_golden():
    assert_golden(rendered_role("semantic_judge"))


def test_semantic_judge_prompt_spot_checks_independent_of_golden():
    r = rendered_role("semantic_judge")
    shipped = r["semantic_judge_shipped_examples.en"][1]["content"]
    assert "Example sub-constraint: Does the question ask" in shipped
    assert shipped.count("Example judgment: ") == 2 and shipped.count("Example sub-constraint: ") == 1
    assert shipped.rstrip().endswith("Sub-constraint: Is the first factor a two-digit number?")
    assert "two examples" in r["semantic_judge_shipped_examples.en"][0]["content"]
    assert "two examples" not in r["semantic_judge_no_demos.en"][0]["content"]  # said only when shown
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
        "示例定义：100 以内的加法。\n示例题目：40 + 7 等于多少？" in r["semantic_judge_other_concept.zh"][1]["content"]
    )


def test_semantic_examples_take_the_concepts_rows_by_semantic_label_else_the_shipped_pair():
    shipped = SemanticExamples().pair_for(DEFINITION, "en")
    yes = TaggingExample("d1", "mul", DEFINITION, "A crate has 21 jars. How many in 4 crates?", 1)
    numerical_no = TaggingExample("d2", "mul", DEFINITION, "A crate has 210 jars. How many in 4 crates?", 0)
    semantic_no = TaggingExample("d3", "mul", "Addition within 100.", "What is 21 + 4?", 0, semantic_label=0)
    assert semantic_examples([numerical_no, semantic_no, yes], shipped, DEFINITION) == [
        {"question": "A crate has 21 jars. How many in 4 crates?", "label": 1},
        {"question": "What is 21 + 4?", "label": 0, "definition": "Addition within 100."},
    ]
    own_yes, shipped_no = semantic_examples([yes, numerical_no], shipped, DEFINITION)
    assert own_yes == {"question": "A crate has 21 jars. How many in 4 crates?", "label": 1}
    assert shipped_no == {
        "question": shipped.negative.question,
        "label": 0,
        "reasoning": shipped.negative.reasoning,
        "definition": shipped.negative.definition,
        "constraint": shipped.negative.constraint,
    }
    both = semantic_examples([], shipped, DEFINITION)
    assert [e["label"] for e in both] == [1, 0] and "constraint" in both[0] and "constraint" not in both[1]
    assert semantic_examples([numerical_no], None, DEFINITION) == []


def test_judgment_clean_noisy_and_last_tag_wins():
    assert parse_judgment("It multiplies two numbers. <Yes>").verdict is True
    j = parse_judgment("At first <Yes> seemed right, but 347 has three digits.\n**< no >**")
    assert j.verdict is False and j.reasoning.endswith("three digits.\n**")
    assert parse_judgment("理由：是乘法。<是>").verdict is True
    assert parse_judgment("The sum is 125.\nAnswer: **No**").verdict is False


def test_judgment_json_answer_and_reason():
    judgment = make_semantic_judge().parse('{"reasoning": "It multiplies.", "answer": "Yes"}', "json")
    assert judgment.verdict is True and judgment.reasoning == "It multiplies."
    with pytest.raises(ParseError, match="answer"):
        make_semantic_judge().parse('{"reasoning": "x", "answer": "Maybe"}', "json")


def test_judgment_json_cut_by_max_tokens_keeps_its_answer():
    judgment = make_semantic_judge().parse('{"answer": "Yes", "reasoning": "The question mul', "json", truncated=True)
    assert judgment.verdict is True and judgment.reasoning == "The question mul"
