"""The numerical judge's code grammars (``pipelines/tagging/agents/program_grammar.py``) read as
regular expressions: which lines and comparison sides they admit over the given variables. That
xgrammar admits the same strings, and that every admitted line runs, is in ``test_reply_bounds.py``."""

import re

import pytest

from pipelines.tagging.agents.program_grammar import check_pattern, expression_pattern


def test_check_pattern_admits_conditions_over_the_given_variables_only():
    pattern = re.compile(check_pattern(["first"], ["prices"]))
    for line in (
        "print(10 <= first <= 99)",
        "print(first % 10 < 5 and len(prices) == 3)",
        "print(any(100 <= x <= 999 for x in prices))",
        "print(len(set(prices)) == 3 or abs(first) > 1)",
    ):
        assert pattern.fullmatch(line), line
    for line in (
        "print(second > 1)",  # not a given variable
        "print(prices + 1 > 2)",  # a list in arithmetic
        "print(first / 0 > 1)",  # a literal zero divisor
        "print(first)",  # not a condition
        "print(1 < 2)",  # about no value of the question
        "print(first > 1)\nprint(True)",  # one line only
    ):
        assert not pattern.fullmatch(line), line


def test_check_pattern_needs_a_variable():
    with pytest.raises(ValueError, match="at least one variable"):
        check_pattern([], [])


def test_expression_pattern_sides():
    left = re.compile(expression_pattern(["first"], ["prices"], variable_first=True))
    right = re.compile(expression_pattern(["first"], ["prices"]))
    assert left.fullmatch("sum(prices) + first") and left.fullmatch("first // 7")
    assert not left.fullmatch("10 + first") and right.fullmatch("10 + first")
    assert not right.fullmatch("prices + 1") and not right.fullmatch("second")
    generic = re.compile(expression_pattern(variable_first=True))
    assert generic.fullmatch("any_name * 2") and not generic.fullmatch("first second")
