"""Question solver: question -> worked solution and final answer.

Text reply: reasoning steps, then a line ``Final answer: ...`` (``最终答案：...``). A reply with
neither a final-answer line nor any digit is not a solution (ParseError). JSON reply:
:class:`SolutionOutput` (the answer first, so a reply cut by ``max_tokens`` still parses);
its solution text ends with the same ``Final answer:`` line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from pipelines.agents import Agent, ParseError
from pipelines.agents.reply_bounds import trimmed_text

ANSWER = re.compile(r"(?:final answer|answer|最终答案|答案)\s*[:：]\s*(.+)", re.I)


@dataclass
class Solution:
    text: str
    answer: str | None


class SolutionOutput(BaseModel):
    """JSON-mode reply of the solver."""

    final_answer: str = Field(pattern=trimmed_text(1, 20))  # never blank
    reasoning: str = Field("", max_length=80)

    def to_result(self) -> Solution:
        answer = self.final_answer.strip()
        if not answer:
            raise ParseError("empty final answer")
        label = "最终答案：" if re.search(r"[\u4e00-\u9fff]", self.reasoning + answer) else "Final answer: "
        return Solution(f"{self.reasoning.strip()}\n{label}{answer}".strip(), answer)


def parse_solution(text: str) -> Solution:
    answers = ANSWER.findall(text)
    answer = answers[-1].strip().strip("*_` ") if answers else None
    if not answer and not re.search(r"\d", text):
        raise ParseError("no final answer line and no number in the reply")
    return Solution(text.strip(), answer or None)


def make_solver(**options) -> Agent[Solution]:
    return Agent("solver", Path(__file__).parent, parse_solution, output=SolutionOutput, **options)
