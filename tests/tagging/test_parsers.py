"""Every tagging parser on clean, noisy, empty and garbage replies."""

import pytest

from pipelines.agents import ParseError
from pipelines.tagging.agents.numerical_judge import (
    NumericArgs,
    Program,
    checking_program,
    make_arg_extractor,
    make_program_writer,
    parse_args,
    parse_program,
)
from pipelines.tagging.agents.planner import SubConstraint, make_planner, parse_plan
from pipelines.tagging.agents.semantic_judge import make_semantic_judge, parse_judgment
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.agents.solver import make_solver, parse_solution

AGENTS = [
    make_planner(),
    make_solver(),
    make_semantic_judge(),
    make_arg_extractor(),
    make_program_writer(),
    make_single_llm(),
]
GARBAGE = ["!!!???", "lorem ipsum dolor", "}{", "<maybe>", "```\n```"]


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.name)
def test_every_agent_rejects_empty_and_garbage(agent):
    for bad in ("", "  \n\t", None, *GARBAGE):
        with pytest.raises(ParseError):
            agent.parse(bad)


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


def test_solution_clean_noisy_and_without_marker():
    assert parse_solution("47 x 6 = 282\nFinal answer: 282").answer == "282"
    assert parse_solution("计算：47×6=282。\n最终答案：282 个").answer == "282 个"
    assert parse_solution("**Final Answer:** **282**").answer == "282"
    loose = parse_solution("We get 282 pencils.")
    assert loose.answer is None and loose.text == "We get 282 pencils."


def test_judgment_clean_noisy_and_last_tag_wins():
    assert parse_judgment("It multiplies two numbers. <Yes>").verdict is True
    j = parse_judgment("At first <Yes> seemed right, but 347 has three digits.\n**< no >**")
    assert j.verdict is False and j.reasoning.endswith("three digits.\n**")
    assert parse_judgment("理由：是乘法。<是>").verdict is True
    assert parse_judgment("The sum is 125.\nAnswer: **No**").verdict is False


def test_args_clean_noisy_and_unusable():
    assert parse_args('{"first_factor": 47, "second_factor": 6}').values == {"first_factor": 47, "second_factor": 6}
    noisy = (
        "Here you go:\n```json\n{'Unit price': '1,250 yuan', 'prices': [125, '30'], 'note': 'none', 'class': 2.5,}\n```"
    )
    assert parse_args(noisy).values == {"unit_price": 1250, "prices": [125, 30], "class_": 2.5}
    with pytest.raises(ParseError, match="no numerical argument"):
        parse_args('{"note": "n/a"}')
    with pytest.raises(ParseError, match="no JSON object"):
        parse_args("first = 47")


def test_program_clean_noisy_invalid():
    assert parse_program("```python\nprint(10 <= a <= 99)\n```").code == "print(10 <= a <= 99)"
    noisy = "The check:\n```py\nok = a % b != 0\nprint(ok)\n```\nThis prints True when there is a remainder."
    assert parse_program(noisy).code == "ok = a % b != 0\nprint(ok)"
    assert parse_program("print(a > 1)").code == "print(a > 1)"
    with pytest.raises(ParseError, match="not valid Python"):
        parse_program("```python\nprint(a >\n```")
    with pytest.raises(ParseError, match="prints nothing"):
        parse_program("```python\nx = 1\n```")
    code = checking_program(NumericArgs({"a": 47, "prices": [1, 2]}), Program("print(a > 1)"))
    assert code == "a = 47\nprices = [1, 2]\n\nprint(a > 1)\n"


def test_argument_names_never_shadow_builtins():
    from pipelines.agents.parsing import identifier

    assert identifier("max") == "max_" and identifier("sum") == "sum_" and identifier("unit price") == "unit_price"


# ---------------------------------------------------------------- json mode: the same results


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.name)
def test_every_agent_in_json_mode_rejects_empty_garbage_and_off_schema(agent):
    for bad in ("", "  \n\t", None, *GARBAGE, '{"unexpected": 1}', "[1, 2]"):
        with pytest.raises(ParseError):
            agent.parse(bad, "json")
    assert agent.json_schema["type"] == "object"


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


def test_solution_judgment_args_program_json():
    solution = make_solver().parse('{"reasoning": "47 x 6 = 282.", "final_answer": "282"}', "json")
    assert solution.answer == "282" and solution.text == "47 x 6 = 282.\nFinal answer: 282"
    zh = make_solver().parse('{"reasoning": "47×6=282。", "final_answer": "282 个"}', "json")
    assert zh.text == "47×6=282。\n最终答案：282 个"
    judgment = make_semantic_judge().parse('{"reasoning": "It multiplies.", "answer": "Yes"}', "json")
    assert judgment.verdict is True and judgment.reasoning == "It multiplies."
    assert make_single_llm().parse('{"reasoning": "", "answer": "No"}', "json").verdict is False
    with pytest.raises(ParseError, match="answer"):
        make_semantic_judge().parse('{"reasoning": "x", "answer": "Maybe"}', "json")
    args = make_arg_extractor().parse(
        '{"arguments": [{"name": "First factor", "value": 47}, {"name": "prices", "value": [1.5, 2]}]}', "json"
    )
    assert args.values == {"first_factor": 47, "prices": [1.5, 2]}
    with pytest.raises(ParseError, match="arguments"):
        make_arg_extractor().parse('{"arguments": [{"name": "x", "value": "many"}]}', "json")
    program = make_program_writer().parse('{"code": "print(10 <= first <= 99)"}', "json")
    assert program.code == "print(10 <= first <= 99)"
    with pytest.raises(ParseError, match="prints nothing"):
        make_program_writer().parse('{"code": "x = 1"}', "json")
    with pytest.raises(ParseError, match="not valid Python"):
        make_program_writer().parse('{"code": "print(a >"}', "json")


def test_json_replies_cut_by_max_tokens_keep_their_complete_fields():
    cut_plan = '{"constraints": [{"kind": "semantic", "text": "Does it multiply?"}, {"kind": "nume'
    plan = make_planner().parse(cut_plan, "json", truncated=True)
    assert plan.constraints == [SubConstraint("semantic", "Does it multiply?")]
    with pytest.raises(ParseError):
        make_planner().parse(cut_plan, "json")  # not cut by the length limit: malformed
    judgment = make_semantic_judge().parse('{"answer": "Yes", "reasoning": "The question mul', "json", truncated=True)
    assert judgment.verdict is True and judgment.reasoning == "The question mul"
    solution = make_solver().parse('{"final_answer": "282", "reasoning": "47 x', "json", truncated=True)
    assert solution.answer == "282" and solution.text == "47 x\nFinal answer: 282"
    with pytest.raises(ParseError):
        make_program_writer().parse('{"code": "print(10 <= first', "json", truncated=True)  # not valid Python
