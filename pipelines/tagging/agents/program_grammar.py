"""Regular grammars of the numerical judge's code, as JSON-schema patterns the backends enforce.

A pattern names only the variables one call defined (the arguments just extracted), so every reply
it admits is code that runs on them: no undefined name, no list in arithmetic, no division by a
literal zero. Written for xgrammar 0.2.7: no ``?`` after a group or a repeat (use ``{0,1}``), no
newline (a JSON string may not hold one raw; xgrammar would write it raw).

- :func:`check_pattern` (``team.program: python``): one line of Python, ``print(<condition>)``, where
  the condition is one or two clauses joined by ``and`` / ``or``, each a comparison chain over the
  variables (``first + second <= 20``, ``10 <= first <= 99``, ``a % 10 < b % 10``,
  ``len(str(price)) == 3``, ``len(set(digits)) == 3``) or ``any`` / ``all`` over a list
  (``any(100 <= x <= 999 for x in prices)``); a condition is always a bool, so the program prints
  True or False.
- :func:`expression_pattern` (``team.program: comparisons``): one side of a comparison the JSON
  form holds.
"""

from __future__ import annotations

IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]{0,22}"  # numeric_args' names: 20 characters + a "_" and a "_2" suffix
LITERAL = r"-{0,1}(0|[1-9][0-9]{0,5})(\.[0-9]{1,3}){0,1}"
NONZERO = r"-{0,1}([1-9][0-9]{0,5}(\.[0-9]{1,3}){0,1}|0\.([0-9]{0,2}[1-9]))"
CALLS = ("len", "sum", "min", "max")
OPERATOR = r" (\+|-|\*|/|//|%) "
COMPARE = r" (<|<=|>|>=|==|!=) "
BOUND = r" (<|<=) "
CODE_CHARACTERS = r"[A-Za-z0-9_ .,()<>=!+*/%-]"
"""Every character :func:`check_pattern` can write (the declared schema's class)."""


def _alternatives(*options: str) -> str:
    return "(" + "|".join(o for o in options if o) + ")"


def _values(scalars: list[str], lists: list[str]) -> list[str]:
    """Operands that are question values: a scalar, its digit count or absolute value, and
    len/sum/min/max of a list or its count of distinct values."""
    out = []
    if scalars:
        names = "|".join(scalars)
        out += [f"({names})", rf"len\(str\(({names})\)\)", rf"abs\(({names})\)"]
    if lists:
        names = "|".join(lists)
        out += [rf"({'|'.join(CALLS)})\(({names})\)", rf"len\(set\(({names})\)\)"]
    return out


def _term(first: str, operand: str, divisor: str) -> str:
    """``first``, or ``first`` and one more operand joined by an operator (a divisor is never a literal 0)."""
    return f"{first}( (\\+|-|\\*) {operand}| (/|//|%) {divisor}){{0,1}}"


def check_pattern(scalars: list[str], lists: list[str]) -> str:
    """The pattern of a ``print(<condition>)`` line over these variables (see the module docstring)."""
    values = _values(scalars, lists)
    if not values:
        raise ValueError("a checking program needs at least one variable")
    value = _alternatives(*values)
    operand = _alternatives(LITERAL, *values)
    divisor = _alternatives(NONZERO, *values)
    term = _term(operand, operand, divisor)
    about = _term(value, operand, divisor)  # starts with a question value, so the check is about the question
    clauses = [f"{about}({COMPARE}{term}){{1,2}}", f"{LITERAL}{BOUND}{about}{BOUND}{LITERAL}"]
    if lists:
        names = "|".join(lists)
        item_operand = _alternatives("x", LITERAL, *values)
        item_divisor = _alternatives("x", NONZERO, *values)
        item = _term("x", item_operand, item_divisor)
        item_term = _term(item_operand, item_operand, item_divisor)
        tail = f" for x in ({names})\\)"
        clauses.append(f"(any|all)\\({item}({COMPARE}{item_term}){{1,2}}{tail}")
        clauses.append(f"(any|all)\\({LITERAL}{BOUND}{item}{BOUND}{LITERAL}{tail}")
    clause = _alternatives(*clauses)
    return f"^print\\({clause}( (and|or) {clause}){{0,1}}\\)$"


def expression_pattern(
    scalars: list[str] | None = None, lists: list[str] | None = None, *, variable_first: bool = False
) -> str:
    """One side of a comparison: an operand, or two joined by + - * / // %; an operand is a number,
    a scalar variable or ``len|sum|min|max(<list variable>)`` (``variable_first``: the first
    operand is not a number, so the check is about the question's values). With variable names
    given, only those (every reply is then a program that runs: no undefined name, no list in
    arithmetic); without, any identifier."""
    scalar = "|".join(scalars) if scalars is not None else IDENTIFIER
    listed = "|".join(lists) if lists is not None else IDENTIFIER
    variables = ([f"({scalar})"] if scalar else []) + ([rf"({'|'.join(CALLS)})\(({listed})\)"] if listed else [])
    operand = "(" + "|".join([LITERAL, *variables]) + ")"
    first = "(" + "|".join(variables) + ")" if variable_first else operand
    return f"^{first}({OPERATOR}{operand}){{0,1}}$"
