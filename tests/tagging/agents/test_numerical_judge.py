"""The numerical judge's agents (``pipelines/tagging/agents/numerical_judge.py``): the argument
extractor's and the program writer's rendered prompts, the argument values as written (fractions,
percentages, lists), the argument names, the programs (text, json python line, json comparisons)
and the program the sandbox runs. The narrowed json forms are in ``test_reply_bounds.py``."""

from fractions import Fraction

import pytest

from pipelines.agents import ParseError
from pipelines.agents.parsing import identifier
from pipelines.tagging.agents.numerical_judge import (
    NumericArgs,
    Program,
    checking_program,
    make_arg_extractor,
    make_program_writer,
    parse_args,
    parse_program,
)
from tests.tagging.agents.prompt_cases import assert_golden, rendered_role


def test_numerical_judge_prompts_match_golden():
    assert_golden(rendered_role("numerical_judge"))


def test_numerical_judge_prompt_spot_checks_independent_of_golden():
    r = rendered_role("numerical_judge")
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
    assert identifier("max") == "max_" and identifier("sum") == "sum_" and identifier("unit price") == "unit_price"


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


def test_args_json_names_numbers_and_garbage():
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


def test_comparison_program_replies_json():
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


def test_program_json_cut_by_max_tokens_is_no_program():
    with pytest.raises(ParseError):
        cut = '{"comparisons": [{"left": "first", "op": "<=", "right": "9'
        make_program_writer().parse(cut, "json", truncated=True)
