"""Question solver: question -> worked solution and final answer.

Reply: reasoning steps, then a line ``Final answer: ...`` (``最终答案：...``). A reply with neither
a final-answer line nor any digit is not a solution (ParseError).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pipelines.agents import Agent, ParseError

ANSWER = re.compile(r"(?:final answer|answer|最终答案|答案)\s*[:：]\s*(.+)", re.I)


@dataclass
class Solution:
    text: str
    answer: str | None


def parse_solution(text: str) -> Solution:
    answers = ANSWER.findall(text)
    answer = answers[-1].strip().strip("*_` ") if answers else None
    if not answer and not re.search(r"\d", text):
        raise ParseError("no final answer line and no number in the reply")
    return Solution(text.strip(), answer or None)


def make_solver(**options) -> Agent[Solution]:
    return Agent("solver", Path(__file__).parent, parse_solution, **options)
