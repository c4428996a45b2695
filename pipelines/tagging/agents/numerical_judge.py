"""Numerical judge, in two agents and a sandbox run:

1. ``arg_extractor``: (sub-constraint, question, solution) -> named numerical arguments, as one
   JSON object ``{"first_factor": 47, "prices": [125, 30]}``; names become Python identifiers,
   values numbers or lists of numbers (``"1,250 yuan"`` reads as 1250).
2. ``program_writer``: (sub-constraint, the arguments) -> a Python program over those variables
   that prints ``True`` or ``False``.
3. :func:`checking_program` puts the argument assignments in front of the program; the team runs
   it in the sandbox, and the printed boolean is the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.agents import Agent, ParseError
from pipelines.tagging.parsing import code_block, identifier, json_object, to_number

Value = int | float | list


@dataclass
class NumericArgs:
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Program:
    code: str


def parse_args(text: str) -> NumericArgs:
    raw = json_object(text)
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
    code = code_block(text)
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
    return Agent("arg_extractor", Path(__file__).parent, parse_args, **options)


def make_program_writer(**options) -> Agent[Program]:
    options.setdefault("role", "numerical_judge")
    return Agent("program_writer", Path(__file__).parent, parse_program, **options)
