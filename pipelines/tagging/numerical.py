"""The numerical judge's flow for one sub-constraint (the paper's Instructions 1 and 2): extract the
arguments, write a program over them, run it in the sandbox; the printed boolean is the verdict.

:class:`NumericalJudge` holds the two agents (``pipelines.tagging.agents.numerical_judge``), the
program form (``team.program``), the sandbox and its concurrency limit, and counts how every check
went (:data:`NUMERICAL_COUNTS`); the team owns one and calls :meth:`NumericalJudge.judge`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelines.agents import Agent, SampleTrace
from pipelines.agents.sandbox import SandboxLimits
from pipelines.tagging.agents.numerical_judge import PROGRAM_FORMS, assignments, checking_program
from pipelines.tagging.agents.planner import SubConstraint
from pipelines.tagging.data import TaggingExample

NUMERICAL_COUNTS = ("checks", "no_arguments", "no_program", "programs_run", "verdicts", "no_verdict", "printed_true")
"""Numerical sub-constraints judged; of them, without arguments (the extractor's call failed or its
reply never parsed) or without a program (the writer's); programs run in the sandbox; runs that
printed True or False (and how many True) or no boolean (an error, a timeout, a kill)."""


@dataclass
class ConstraintOutcome:
    """How one sub-constraint was settled."""

    kind: str
    text: str
    verdict: bool
    settled_by: str
    error: str | None = None
    reasoning: str = ""
    arguments: str = ""
    program: str = ""


class NumericalJudge:
    """Arguments -> program -> sandbox for one numerical sub-constraint at a time."""

    def __init__(
        self,
        arg_extractor: Agent,
        program_writer: Agent,
        program: str,
        sandbox: Callable[..., Any],
        limits: SandboxLimits,
        concurrency: int,
    ):
        self.arg_extractor, self.program_writer, self.program = arg_extractor, program_writer, program
        self.sandbox, self.limits, self.concurrency = sandbox, limits, concurrency
        self.counts: Counter[str] = Counter({k: 0 for k in NUMERICAL_COUNTS})
        self._slots: asyncio.Semaphore | None = None  # made inside the running loop

    async def judge(
        self,
        llm: Any,
        example: TaggingExample,
        solution: str,
        index: int,
        constraint: SubConstraint,
        trace: SampleTrace,
        *,
        mode: str,
    ) -> ConstraintOutcome:
        """The sub-constraint's outcome; every agent's record (and the program and its sandbox
        result) goes to ``trace``; a failure is an outcome with ``error`` set, never an exception."""

        def failed(error: str) -> ConstraintOutcome:
            return ConstraintOutcome(constraint.kind, constraint.text, False, "policy:no", error=error)

        counts = self.counts
        counts["checks"] += 1
        vars = {
            "definition": example.definition,
            "constraint": constraint.text,
            "question": example.question,
            "solution": solution,
            "language": example.language,
        }
        extracted = await self.arg_extractor.run(llm, vars, tag=f"constraint-{index}", mode=mode)
        trace.add(extracted, constraint_index=index, constraint=constraint)
        if not extracted.ok:
            counts["no_arguments"] += 1
            return failed(f"arg_extractor: {extracted.error}")
        variables = assignments(extracted.parsed.values)
        narrowed = PROGRAM_FORMS[self.program][1](extracted.parsed.values) if mode == "json" else None
        written = await self.program_writer.run(
            llm,
            {
                "definition": example.definition,
                "question": example.question,
                "variables": variables,
                "constraint": constraint.text,
                "program": self.program,
                "language": example.language,
            },
            tag=f"constraint-{index}",
            mode=mode,
            output=narrowed,
        )
        if not written.ok:
            counts["no_program"] += 1
            trace.add(written, constraint_index=index, constraint=constraint)
            return failed(f"program_writer: {written.error}")
        code = checking_program(extracted.parsed, written.parsed)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        async with self._slots:
            result = await self.sandbox(code, self.limits)
        counts["programs_run"] += 1
        sandbox = dataclasses.asdict(result) if dataclasses.is_dataclass(result) else dict(result.__dict__)
        trace.add(written, constraint_index=index, constraint=constraint, code=code, sandbox=sandbox)
        if result.verdict is None:
            counts["no_verdict"] += 1
            why = result.killed_reason or ("timed out" if result.timed_out else f"exit code {result.exit_code}")
            return failed(f"sandbox: no boolean printed ({why}); stderr: {result.stderr[-300:]}")
        counts["verdicts"] += 1
        counts["printed_true"] += bool(result.verdict)
        return ConstraintOutcome(
            constraint.kind,
            constraint.text,
            bool(result.verdict),
            "numerical_judge",
            arguments=variables.replace("\n", ", "),
            program=written.parsed.code.strip(),
        )
