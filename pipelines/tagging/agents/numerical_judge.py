"""Numerical judge, in two agents and a sandbox run (the paper's Instructions 1 and 2):

1. ``arg_extractor``: (definition, sub-constraint, question, solution) -> named numerical
   arguments, as one JSON object ``{"first_factor": 47, "prices": [125, 30]}``; names become
   distinct Python identifiers (a name without usable characters becomes ``arg_<position>``, a
   repeated one gets ``_2``), values keep their exact value (:func:`read_value`): ``"1/2"`` and
   ``"25%"`` are ``Fraction``, ``"0.75"`` a float, ``"4, 7, 9"`` a list, ``"1,250 yuan"`` 1250,
   ``"−3"`` -3, nested lists stay nested.
2. ``program_writer``: (definition, question, the arguments, sub-constraint) -> a Python program
   over those variables that prints ``True`` or ``False``.
3. :func:`checking_program` puts the argument assignments in front of the program; the team runs
   it in the sandbox, and the printed boolean is the verdict.

JSON replies: :class:`ArgsOutput` (``{"arguments": [{"name": "first", "value": 47}]}``: the schema
admits identifier-like names and bounded numbers or number texts such as ``"1/2"`` only) and, by
``team.program``, :class:`ScriptOutput` (``python``, the default: ``{"code": "print(10 <= first
<= 99)"}``, a line of Python the model writes) or :class:`ProgramOutput` (``comparisons``:
``{"comparisons": [{"left": "first", "op": ">=", "right": "10"}, ...]}``, comparisons that must
all hold, which become the program ``print(bool((first) >= (10) and ...))``). The team constrains
each program-writer call with the form's narrowing to the extracted arguments
(:func:`script_output`, :func:`program_output`; grammars in
:mod:`pipelines.tagging.agents.program_grammar`), so a schema-valid reply names only defined
variables and always runs. Every field is bounded, so the longest schema-valid reply is known
(``pipelines.agents.reply_bounds``). In text mode the writer replies with a free ```python block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, create_model

from pipelines.agents import Agent, ParseError
from pipelines.agents.parsing import code_block, identifier, json_object
from pipelines.tagging.agents.program_grammar import CODE_CHARACTERS, check_pattern, expression_pattern

Value = int | float | Fraction | list
NUMBER = re.compile(
    r"(?:(?P<whole>-?\d+)\s+(?=\d+\s*/\s*\d))?"  # the 1 of a mixed number "1 1/2"
    r"(?P<num>-?\d+(?:,\d{3}(?!\d))*(?:\.\d+)?)"  # 47, -3, 1,250, 0.75
    r"(?:\s*/\s*(?P<den>\d+))?"  # a fraction 1/2
    r"(?P<pct>\s*%)?"
)


class NumericArgs:
    """Named argument values (numbers, Fractions, lists); ``model_dump`` gives JSON for traces."""

    def __init__(self, values: dict[str, Any] | None = None):
        self.values = dict(values or {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NumericArgs) and other.values == self.values

    def __repr__(self) -> str:
        return f"NumericArgs({self.values!r})"

    def model_dump(self) -> dict[str, Any]:
        return {"values": {name: _jsonable(v) for name, v in self.values.items()}}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _token(match: re.Match) -> int | float | Fraction:
    num = match.group("num").replace(",", "")
    value: int | float | Fraction = float(num) if "." in num else int(num)
    if match.group("den") is not None:
        den = int(match.group("den"))
        if den == 0:
            raise ParseError(f"{match.group(0)!r}: division by zero")
        value = Fraction(num) / den
        if match.group("whole") is not None:
            whole = int(match.group("whole"))
            value = whole - value if whole < 0 or match.group("whole").startswith("-") else whole + value
    if match.group("pct"):
        value = Fraction(str(value)) / 100 if not isinstance(value, Fraction) else value / 100
    return value


def read_value(value: Any) -> Value:
    """A JSON value as the number(s) it writes: ints and floats as given, a text's numbers exactly
    (see the module docstring); several numbers in one text make a list. ParseError if none."""
    if isinstance(value, bool) or value is None:
        raise ParseError(f"{value!r} is not a number")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, list):
        return [read_value(v) for v in value]
    text = str(value).replace("\u2212", "-").replace("\uff0c", ",").replace("\uff05", "%")
    numbers = [_token(m) for m in NUMBER.finditer(text)]
    if not numbers:
        raise ParseError(f"{value!r} is not a number")
    return numbers[0] if len(numbers) == 1 else numbers


@dataclass
class Program:
    code: str


# json-mode schemas. Every string is bounded, so the longest valid reply fits the agent's cap
# (pipelines.agents.reply_bounds); patterns use {0,1}, never "?" after a group or a {m,n} repeat,
# which xgrammar 0.2.7 compiles wrongly (tests/tagging/agents/test_reply_bounds.py compares it with re).
NUMBER_TEXT = r"^-{0,1}[0-9]{1,6}(\.[0-9]{1,3}){0,1}(/[1-9][0-9]{0,2}){0,1}%{0,1}$"
"""A number written as text in a json-mode reply: 47, -3, 0.75, 1/2, 25% (read exactly by read_value)."""
NumberText = Annotated[str, Field(pattern=NUMBER_TEXT)]
BoundedNumber = Annotated[float, Field(ge=-1e6, le=1e6)]
"""A JSON number in a json-mode reply; the bounds make xgrammar write at most 7 digits and 6 decimals."""
NAME = r"^[A-Za-z_][A-Za-z0-9_ ]{0,19}$"


class ArgumentOutput(BaseModel):
    """One named argument; the schema admits only numbers (or number texts) as values."""

    name: str = Field(pattern=NAME)
    value: BoundedNumber | NumberText | Annotated[list[BoundedNumber | NumberText], Field(min_length=1, max_length=3)]


class ArgsOutput(BaseModel):
    """JSON-mode reply of the argument extractor."""

    arguments: list[ArgumentOutput] = Field(min_length=1, max_length=3)

    def to_result(self) -> NumericArgs:
        return numeric_args(
            [
                (a.name, [_integral(v) for v in a.value] if isinstance(a.value, list) else _integral(a.value))
                for a in self.arguments
            ]
        )


LEFT = expression_pattern(variable_first=True)
EXPRESSION = expression_pattern()
Operator = Literal["<", "<=", ">", ">=", "==", "!="]


class Comparison(BaseModel):
    left: str = Field(pattern=LEFT)
    op: Operator
    right: str = Field(pattern=EXPRESSION)

    def expression(self) -> str:
        return f"({self.left.strip()}) {self.op} ({self.right.strip()})"


class ProgramOutput(BaseModel):
    """JSON-mode reply of the program writer: comparisons over the variables, all of which must hold."""

    comparisons: list[Comparison] = Field(min_length=1, max_length=2)  # a range check needs two

    def to_result(self) -> Program:
        return condition_program(" and ".join(c.expression() for c in self.comparisons))


def _names(values: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(scalar names, list names), longest first (an alternative never cuts a longer name short)."""
    order = lambda n: (-len(n), n)  # noqa: E731
    scalars = sorted((n for n, v in values.items() if not isinstance(v, list)), key=order)
    return scalars, sorted((n for n, v in values.items() if isinstance(v, list)), key=order)


def program_output(values: dict[str, Any]) -> type[ProgramOutput]:
    """:class:`ProgramOutput` narrowed to these argument values: its sides name only these
    variables (lists only inside len/sum/min/max), so every schema-valid reply runs."""
    scalars, lists = _names(values)
    left = (str, Field(pattern=expression_pattern(scalars, lists, variable_first=True)))
    right = (str, Field(pattern=expression_pattern(scalars, lists)))
    comparison = create_model("Comparison", __base__=Comparison, left=left, right=right)
    bounded = (list[comparison], Field(min_length=1, max_length=2))
    return create_model("ProgramOutput", __base__=ProgramOutput, comparisons=bounded)


MAX_CODE = 448
"""Characters of the longest line :func:`script_output` admits (three 22-character arguments)."""


class ScriptOutput(BaseModel):
    """JSON-mode reply of the program writer: the program, one line that prints a condition over the variables."""

    code: str = Field(pattern=rf"^print\({CODE_CHARACTERS}{{1,{MAX_CODE - 7}}}\)$")

    def to_result(self) -> Program:
        return checked_program(self.code)


def script_output(values: dict[str, Any]) -> type[ScriptOutput]:
    """:class:`ScriptOutput` narrowed to these argument values
    (:func:`pipelines.tagging.agents.program_grammar.check_pattern`): every schema-valid reply is
    a line of Python that runs on them and prints True or False."""
    code = (str, Field(pattern=check_pattern(*_names(values))))
    return create_model("ScriptOutput", __base__=ScriptOutput, code=code)


PROGRAM_FORMS = {"python": (ScriptOutput, script_output), "comparisons": (ProgramOutput, program_output)}
"""``team.program``: the program writer's json-mode output model and its narrowing per call."""


def parse_args(text: str) -> NumericArgs:
    return numeric_args(json_object(text))


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def numeric_args(raw: dict[str, Any] | list[tuple[str, Any]]) -> NumericArgs:
    """Named values (:func:`read_value`) under distinct Python identifiers; non-numeric fields are skipped."""
    values: dict[str, Value] = {}
    items = raw.items() if isinstance(raw, dict) else raw
    for position, (name, value) in enumerate(items, start=1):
        try:
            number = read_value(value)
        except ParseError:
            continue  # a non-numeric field (a unit, a note) is not an argument
        try:
            base = identifier(name)
        except ParseError:
            base = f"arg_{position}"  # a name with no usable characters (e.g. 价格) keeps its value
        name, count = base, 1
        while name in values:
            count += 1
            name = f"{base}_{count}"
        values[name] = number
    if not values:
        raise ParseError("the JSON object holds no numerical argument")
    return NumericArgs(values)


def parse_program(text: str) -> Program:
    return checked_program(code_block(text))


def checked_program(code: str) -> Program:
    """A program that prints and compiles; else ParseError saying why."""
    if "print" not in code:
        raise ParseError("the program prints nothing; it must print True or False")
    try:
        compile(code, "<program>", "exec")
    except SyntaxError as exc:
        raise ParseError(f"the program is not valid Python: {exc.msg} (line {exc.lineno})") from None
    return Program(code)


def condition_program(condition: str) -> Program:
    """``print(bool(<condition>))`` for one Python expression; ParseError when it is not one."""
    expression = condition.strip()
    try:
        compile(expression, "<condition>", "eval")
    except SyntaxError as exc:
        raise ParseError(f"the condition is not one Python expression: {exc.msg}") from None
    return Program(f"print(bool({expression}))")


def assignments(values: dict[str, Any]) -> str:
    """``name = value`` lines defining the arguments (``Fraction(1, 2)`` for an exact fraction)."""
    return "\n".join(f"{name} = {value!r}" for name, value in values.items())


def _has_fraction(value: Any) -> bool:
    return isinstance(value, Fraction) or (isinstance(value, list) and any(_has_fraction(v) for v in value))


def checking_program(args: NumericArgs, program: Program) -> str:
    """The code the sandbox runs: the argument assignments (after ``from fractions import Fraction``
    when one is a fraction), then the written program."""
    head = "from fractions import Fraction\n" if any(_has_fraction(v) for v in args.values.values()) else ""
    return head + assignments(args.values) + "\n\n" + program.code + "\n"


def make_arg_extractor(**options) -> Agent[NumericArgs]:
    options.setdefault("role", "numerical_judge")
    return Agent("arg_extractor", Path(__file__).parent, parse_args, output=ArgsOutput, **options)


def make_program_writer(program: str = "python", **options) -> Agent[Program]:
    """The program writer; ``program`` (``python`` or ``comparisons``) picks its json-mode output."""
    options.setdefault("role", "numerical_judge")
    options.setdefault("repair_truncated", False)  # a condition cut by max_tokens is not the condition
    return Agent("program_writer", Path(__file__).parent, parse_program, output=PROGRAM_FORMS[program][0], **options)
