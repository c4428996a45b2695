"""Every tagging parser on clean, noisy, empty and garbage replies."""

from fractions import Fraction

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


# issue 11, defect 3: numbers reach the program as written
@pytest.mark.parametrize(
    "value, expected",
    [
        ('"1/2"', Fraction(1, 2)),
        ('"-3/4"', Fraction(-3, 4)),
        ('"1 1/2"', Fraction(3, 2)),
        ('"0.75"', 0.75),
        ("0.75", 0.75),
        ('"25%"', Fraction(1, 4)),
        ('"12.5%"', Fraction(1, 8)),
        ('"4, 7, 9"', [4, 7, 9]),
        ('"4,7,9"', [4, 7, 9]),
        ('"1,250 yuan"', 1250),
        ('"1,250, 3,000"', [1250, 3000]),
        ("-3", -3),
        ('"-3"', -3),
        ('"−3"', -3),
        ('[[1, 2], [3, "1/3"]]', [[1, 2], [3, Fraction(1, 3)]]),
        ('["1/2", "2/3"]', [Fraction(1, 2), Fraction(2, 3)]),
        ("12", 12),
    ],
)
def test_argument_values_keep_their_exact_value(value, expected):
    parsed = parse_args('{"x": ' + value + "}").values["x"]
    assert parsed == expected and type(parsed) is type(expected)
    if isinstance(expected, list):
        assert [type(v) for v in parsed] == [type(v) for v in expected]


def test_argument_keys_never_collide_and_a_bad_key_keeps_the_rest():
    values = parse_args('{"Unit price": 5, "unit_price": 7, "unit-price": 9}').values
    assert values == {"unit_price": 5, "unit_price_2": 7, "unit_price_3": 9}
    assert parse_args('{"价格": 5, "n": 2}').values == {"arg_1": 5, "n": 2}


def test_fractions_reach_the_sandbox_program_exactly():
    args = parse_args('{"half": "1/2", "xs": "4, 7, 9"}')
    code = checking_program(args, Program("print(half + half == 1 and sum(xs) == 20)"))
    assert code.startswith("from fractions import Fraction\n")
    namespace = {}
    exec(code.replace("print(", "result = ("), namespace)  # noqa: S102 -- our own test program
    assert namespace["result"] is True and namespace["half"] == Fraction(1, 2)


def test_json_mode_arguments_accept_fractions_and_lists_as_text():
    agent = make_arg_extractor()
    reply = '{"arguments": [{"name": "half", "value": "1/2"}, {"name": "xs", "value": [4, "7"]}]}'
    assert agent.parse(reply, "json").values == {"half": Fraction(1, 2), "xs": [4, 7]}


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
    with pytest.raises(ParseError, match="ArgsOutput"):  # the schema admits numbers only
        make_arg_extractor().parse('{"arguments": [{"name": "x", "value": "many"}]}', "json")
    fractions = '{"arguments": [{"name": "half", "value": "1/2"}, {"name": "p", "value": "25%"}]}'
    exact = make_arg_extractor().parse(fractions, "json")
    assert exact.values == {"half": Fraction(1, 2), "p": Fraction(1, 4)}
    for garbage in ('{"arguments": [{"name": "10 20", "value": 3}]}', '{"arguments": []}'):
        with pytest.raises(ParseError):
            make_arg_extractor().parse(garbage, "json")
    range_check = (
        '{"comparisons": [{"left": "first", "op": ">=", "right": "10"}, {"left": "first", "op": "<=", "right": "99"}]}'
    )
    program = make_program_writer("comparisons").parse(range_check, "json")
    assert program.code == "print(bool((first) >= (10) and (first) <= (99)))"
    noisy = 'Here: {"comparisons": [{"left": "sum(prices)", "op": ">", "right": "100"}]} done'
    assert make_program_writer("comparisons").parse(noisy, "json").code == "print(bool((sum(prices)) > (100)))"
    with pytest.raises(ParseError, match="not one Python expression"):  # the generic schema admits a keyword
        make_program_writer("comparisons").parse('{"comparisons": [{"left": "if", "op": "==", "right": "1"}]}', "json")
    with pytest.raises(ParseError, match="comparisons.0.left"):  # two names need an operator between them
        make_program_writer("comparisons").parse(
            '{"comparisons": [{"left": "first second", "op": "==", "right": "1"}]}', "json"
        )
    for garbage in (
        '{"comparisons": [{"left": "v = 15", "op": "==", "right": "1"}]}',  # no assignment can pass the schema
        '{"comparisons": [{"left": "a", "op": "=", "right": "1"}]}',
        '{"comparisons": []}',
        '{"condition": "a > 1"}',
        "",
        "garbage",
    ):
        with pytest.raises(ParseError):
            make_program_writer("comparisons").parse(garbage, "json")


def test_python_program_replies_json():
    """The default form: the reply's "code" is the program's line, run as written."""
    writer = make_program_writer()
    assert writer.parse('{"code": "print(10 <= first <= 99)"}', "json").code == "print(10 <= first <= 99)"
    for garbage in (
        '{"code": "print(first"}',  # the declared schema admits it, Python does not
        '{"code": "first > 3"}',  # prints nothing
        '{"code": "print(1)\\nimport os"}',
        '{"comparisons": [{"left": "first", "op": ">", "right": "1"}]}',
    ):
        with pytest.raises(ParseError):
            writer.parse(garbage, "json")


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
        cut = '{"comparisons": [{"left": "first", "op": "<=", "right": "9'
        make_program_writer().parse(cut, "json", truncated=True)
