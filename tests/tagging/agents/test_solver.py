"""The question solver (``pipelines/tagging/agents/solver.py``): its rendered prompts and its
parsers on clean, noisy, unmarked, json and cut replies."""

from pipelines.tagging.agents.solver import make_solver, parse_solution
from tests.tagging.agents.prompt_cases import assert_golden, rendered_role


def test_solver_prompts_match_golden():
    assert_golden(rendered_role("solver"))


def test_solver_prompt_spot_check_independent_of_golden():
    assert rendered_role("solver")["solver.en"][1] == {
        "role": "user",
        "content": "Question: A box holds 47 pens. How many pens are in 6 boxes?",
    }


def test_solution_clean_noisy_and_without_marker():
    assert parse_solution("47 x 6 = 282\nFinal answer: 282").answer == "282"
    assert parse_solution("计算：47×6=282。\n最终答案：282 个").answer == "282 个"
    assert parse_solution("**Final Answer:** **282**").answer == "282"
    loose = parse_solution("We get 282 pencils.")
    assert loose.answer is None and loose.text == "We get 282 pencils."


def test_solution_json_ends_with_the_final_answer_line():
    solution = make_solver().parse('{"reasoning": "47 x 6 = 282.", "final_answer": "282"}', "json")
    assert solution.answer == "282" and solution.text == "47 x 6 = 282.\nFinal answer: 282"
    zh = make_solver().parse('{"reasoning": "47×6=282。", "final_answer": "282 个"}', "json")
    assert zh.text == "47×6=282。\n最终答案：282 个"


def test_solution_json_cut_by_max_tokens_keeps_its_answer():
    solution = make_solver().parse('{"final_answer": "282", "reasoning": "47 x', "json", truncated=True)
    assert solution.answer == "282" and solution.text == "47 x\nFinal answer: 282"
