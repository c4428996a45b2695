"""Numerical judge, in two agents and a sandbox run:

1. ``arg_extractor``: (sub-constraint, question, solution) -> named numerical arguments, as one
   JSON object ``{"first_factor": 47, "prices": [125, 30]}``; names become Python identifiers,
   values numbers or lists of numbers (``"1,250 yuan"`` reads as 1250).
2. ``program_writer``: (sub-constraint, the arguments) -> a Python program over those variables
   that prints ``True`` or ``False``.
3. :func:`checking_program` puts the argument assignments in front of the program; the team runs
   it in the sandbox, and the printed boolean is the verdict.

JSON replies: :class:`ArgsOutput` (``{"arguments": [{"name": "first", "value": 47}]}``) and
:class:`ProgramOutput` (``{"code": "print(10 <= first <= 99)"}``), mapped to the same results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from pipelines.agents import Agent, ParseError
from pipelines.agents.parsing import code_block, identifier, json_object, to_number

Value = int | float | list


@dataclass
class NumericArgs:
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Program:
    code: str


class ArgumentOutput(BaseModel):
    name: str = Field(min_length=1, max_length=30)
    value: float | list[float]


class ArgsOutput(BaseModel):
    """JSON-mode reply of the argument extractor."""

    arguments: list[ArgumentOutput] = Field(min_length=1, max_length=4)

    def to_result(self) -> NumericArgs:
        return numeric_args(
            {
                a.name: [_integral(v) for v in a.value] if isinstance(a.value, list) else _integral(a.value)
                for a in self.arguments
            }
        )


class ProgramOutput(BaseModel):
    """JSON-mode reply of the program writer."""

    code: str = Field(min_length=1, max_length=200)

    def to_result(self) -> Program:
        return checked_program(self.code)


def parse_args(text: str) -> NumericArgs:
    return numeric_args(json_object(text))


def _integral(value: int | float) -> int | float:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def numeric_args(raw: dict[str, Any]) -> NumericArgs:
    """Named numbers (or lists of numbers) as Python identifiers; non-numeric fields are skipped."""
    values: dict[str, Value] = {}
    for name, value in raw.items():
        try:
            number = [to_number(v) for v in value] if isinstance(value, list) else to_number(value)
        except ParseError:
            continue  # a non-numeric field (a unit, a note) is not an argument
        values[identifier(name)] = number
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


def assignments(values: dict[str, Any]) -> str:
    """``name = value`` lines defining the arguments (values are numbers or lists of numbers)."""
    return "\n".join(f"{name} = {value!r}" for name, value in values.items())


def checking_program(args: NumericArgs, program: Program) -> str:
    """The code the sandbox runs: the argument assignments, then the written program."""
    return assignments(args.values) + "\n\n" + program.code + "\n"


def make_arg_extractor(**options) -> Agent[NumericArgs]:
    options.setdefault("role", "numerical_judge")
    return Agent("arg_extractor", Path(__file__).parent, parse_args, output=ArgsOutput, **options)


def make_program_writer(**options) -> Agent[Program]:
    options.setdefault("role", "numerical_judge")
    return Agent("program_writer", Path(__file__).parent, parse_program, output=ProgramOutput, **options)
