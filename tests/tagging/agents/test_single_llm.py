"""The single-LLM baseline (``pipelines/tagging/agents/single_llm.py``): its rendered prompts with
demonstrations of the concept and of another concept, and its json reply (the semantic judge's
parsers, tested in ``test_semantic_judge.py``)."""

from pipelines.tagging.agents.single_llm import make_single_llm
from tests.tagging.agents.prompt_cases import assert_golden, rendered_role


def test_single_llm_prompts_match_golden():
    assert_golden(rendered_role("single_llm"))


def test_single_llm_prompt_spot_checks_independent_of_golden():
    r = rendered_role("single_llm")
    assert r["single_llm.en"][1]["content"].endswith(
        "Question: Tom has 72 pens and gets 8 more. How many now?\n"
        "Reasoning: The question does not satisfy the definition. <No>\n\n"
        "Question: A box holds 47 pens. How many pens are in 6 boxes?\nReasoning:"
    )
    assert (
        "\n\nDefinition: Addition within 100.\nQuestion: What is 40 + 7?\nReasoning:"
        in (r["single_llm_other_concept.en"][1]["content"])
    )


def test_single_llm_json_verdict():
    assert make_single_llm().parse('{"reasoning": "", "answer": "No"}', "json").verdict is False
