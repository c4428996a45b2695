"""The multi-agent tagging team for one (definition, question) pair.

    planner ─┐                      ┌─ semantic judge (per semantic sub-constraint)
             ├─ per sub-constraint ─┤
    solver  ─┘                      └─ arg extractor -> program writer -> sandbox (per numerical one)
                                         verdict = AND of the sub-constraint verdicts

The planner and the solver run concurrently; judges of different sub-constraints run
concurrently. The plan depends on the definition alone, so it is made once per (definition,
language) and shared by every question of that concept; a plan call that fails with an LLM error
is tried again up to ``plan_attempts`` times and never shared, so the next question tries anew.
The semantic judge sees a positive and a negative example (its module's ``semantic_examples``): the
concept's own rows where their semantic label is known, else the shipped judged sub-constraints.
The numerical judge extracts the arguments, writes a program over them (``program``: a line of
Python in json mode by default, or JSON comparisons) and runs it in the sandbox; how each check
went is counted (:meth:`TaggingTeam.numerical`). A verdict is *unanswered*
(``TeamVerdict.answered`` False) when it hangs on a failed sub-task: no judged sub-constraint
says No and a failed one was set to No. A failed sub-task (a reply that never parsed, an LLM
error, a sandbox error or timeout, a program printing no boolean) is counted, traced and settled
by ``failure_policy``: ``no`` (the sub-constraint fails) or ``semantic`` (a failed numerical
check is re-judged by the semantic judge; if that fails too, No). A failed plan falls back to the
whole definition as one semantic sub-constraint; a failed
solution leaves the judges without one. Both count as failures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from pipelines.agents import Agent, SampleTrace
from pipelines.agents.reply_bounds import max_reply_bytes
from pipelines.agents.sandbox import SandboxLimits, run_python
from pipelines.config import StrictModel
from pipelines.tagging.agents.numerical_judge import make_arg_extractor, make_program_writer
from pipelines.tagging.agents.planner import Plan, SubConstraint, make_planner
from pipelines.tagging.agents.semantic_judge import make_semantic_judge, semantic_examples
from pipelines.tagging.agents.solver import make_solver
from pipelines.tagging.agents.worked_examples import PlannerExamples, SemanticExamples
from pipelines.tagging.data import TaggingExample
from pipelines.tagging.numerical import ConstraintOutcome, NumericalJudge
from pipelines.tagging.split import question_key

AGENTS = ("planner", "solver", "semantic_judge", "arg_extractor", "program_writer")
AgentName = Literal["planner", "solver", "semantic_judge", "arg_extractor", "program_writer"]
NO_SOLUTION = {"en": "(no solution available)", "zh": "（没有可用的解答）"}
WHOLE_DEFINITION = {"en": "Does the question satisfy the whole definition?", "zh": "题目是否满足整个定义？"}


class AgentSampling(StrictModel):
    """One agent's sampling overrides (null keeps the role's ``llm.sampling`` / ``llm.roles.<role>.sampling``)."""

    temperature: float | None = Field(
        None, ge=0.0, le=2.0,
        description="sampling temperature of this agent (null: llm.sampling's)",
    )
    top_p: float | None = Field(None, gt=0.0, le=1.0, description="nucleus sampling mass (null: llm.sampling's)")
    max_tokens: int | None = Field(
        None, ge=1,
        description="reply cap of this agent (null: team.max_tokens, else llm.sampling's)",
    )
    stop: list[str] | None = Field(None, description="stop strings (null: llm.sampling's)")
    seed: int | None = Field(None, description="sampling seed (null: llm.sampling's)")
    n: int | None = Field(None, ge=1, description="choices per call (null: llm.sampling's)")


class TeamConfig(StrictModel):
    """How the team runs (see the module docstring)."""

    failure_policy: Literal["no", "semantic"] = Field(
        "no",
        description="failed sub-task -> \"no\" (sub-constraint fails) | semantic (re-judge a failed numerical check "
        "semantically). Quote \"no\".",
    )
    program: Literal["python", "comparisons"] = Field(
        "python",
        description="json mode: the program writer writes a line of Python, print(<condition over the variables>) "
        "(the paper's Instruction 2) | comparisons (JSON comparisons made into that line); text mode: a ```python "
        "block",
    )
    max_attempts: int = Field(
        2, ge=1,
        description="tries per agent when a reply does not parse (re-asked with the next sample index)",
    )
    retry_temperature: float | None = Field(
        0.7, ge=0.0, le=2.0,
        description="temperature of re-asks after a greedy attempt (null: keep)",
    )
    max_constraints: int = Field(
        5, ge=1,
        description="sub-constraints kept from the plan (5 for real models); cut ones are counted (metrics: "
        "plan_truncation)",
    )
    plan_attempts: int = Field(
        2, ge=1,
        description="tries of the shared per-definition plan on an LLM error (a failed plan is never shared)",
    )
    max_tokens: dict[AgentName, int] = Field(
        {},
        description="per-agent reply caps in text mode (default: llm.sampling.max_tokens). In json mode each "
        "agent's cap is the longest reply its schema admits, so a reply always closes: planner 663 (2 "
        "sub-constraints), solver 437, semantic_judge and single_llm 274, arg_extractor 330, program_writer 460 "
        "(335 comparisons)",
    )
    sampling: dict[AgentName, AgentSampling] = Field(
        {},
        description="per-agent overrides of temperature, top_p, max_tokens, stop, seed, n, e.g. {semantic_judge: "
        "{n: 3, temperature: 0.7}}",
    )
    semantic_demonstrations: bool = Field(
        True,
        description="show the semantic judge a positive and a negative example (the concept's rows, else "
        "semantic_examples.jsonl)",
    )
    sandbox: SandboxLimits = Field(SandboxLimits(), description="limits of each numerical-judge program run")
    sandbox_concurrency: int = Field(
        8, ge=1,
        description="programs run at once (the sandbox also caps at 2 x CPU count)",
    )

    @field_validator("failure_policy", mode="before")
    @classmethod
    def _yaml_no(cls, value: Any) -> Any:
        """YAML 1.1 reads an unquoted ``no`` as false; take it as the ``"no"`` policy."""
        return "no" if value is False else value


@dataclass
class TeamVerdict:
    verdict: bool
    constraints: list[ConstraintOutcome] = field(default_factory=list)
    failures: int = 0
    solution: str = ""
    truncated: int = 0

    @property
    def answered(self) -> bool:
        """False when the verdict hangs on a failed sub-task (see the module docstring)."""
        failed = [c for c in self.constraints if c.settled_by == "policy:no"]
        return not failed or any(not c.verdict for c in self.constraints if c.settled_by != "policy:no")


def agent_options(cfg: TeamConfig, agent: str) -> dict[str, Any]:
    """Constructor options of one agent: attempts, retry temperature and its sampling overrides."""
    sampling = cfg.sampling.get(agent, AgentSampling()).model_dump(exclude_none=True)
    if agent in cfg.max_tokens:
        sampling.setdefault("max_tokens", cfg.max_tokens[agent])
    return {"max_attempts": cfg.max_attempts, "retry_temperature": cfg.retry_temperature, **sampling}


def cap_to_schema(agent: Agent) -> Agent:
    """In json mode: the agent's ``max_tokens`` becomes the longest reply its schema admits (UTF-8
    bytes, so at least its tokens), so a constrained reply always closes; a configured cap, made
    for text mode, would only cut it. Returns the agent."""
    agent.sampling["max_tokens"] = max_reply_bytes(agent.json_schema)
    return agent


class TaggingTeam:
    """Runs the team; ``llm_for(role)`` gives each role its LLM (``LLMRuntime.for_role``)."""

    def __init__(
        self,
        llm_for: Callable[[str], Any],
        cfg: TeamConfig,
        demonstrations: Any = None,
        sandbox: Callable[..., Any] = run_python,
        *,
        mode: Literal["text", "json"] = "text",
        planner_examples: PlannerExamples | None = None,
        semantic_pairs: SemanticExamples | None = None,
    ):
        self.cfg = cfg
        self.planner_examples = planner_examples or PlannerExamples()
        self.semantic_pairs = semantic_pairs or SemanticExamples()
        self.mode = mode
        self.demonstrations = demonstrations  # {concept: [rows]} or an object with for_example(example)
        self.sandbox = sandbox
        self.planner = make_planner(cfg.max_constraints, **agent_options(cfg, "planner"))
        self.solver = make_solver(**agent_options(cfg, "solver"))
        self.semantic_judge = make_semantic_judge(**agent_options(cfg, "semantic_judge"))
        self.arg_extractor = make_arg_extractor(**agent_options(cfg, "arg_extractor"))
        self.program_writer = make_program_writer(cfg.program, **agent_options(cfg, "program_writer"))
        if mode == "json":
            for agent in (self.planner, self.solver, self.semantic_judge, self.arg_extractor, self.program_writer):
                cap_to_schema(agent)
        self._llms: dict[str, Any] = {}
        self._llm_for = llm_for
        self._plans: dict[tuple[str, str], asyncio.Future] = {}
        self.plan_truncations: dict[tuple[str, str], int] = {}
        self.numerical_judge = NumericalJudge(
            self.arg_extractor, self.program_writer, cfg.program, sandbox, cfg.sandbox, cfg.sandbox_concurrency
        )

    def llm(self, role: str) -> Any:
        if role not in self._llms:
            self._llms[role] = self._llm_for(role)
        return self._llms[role]

    def own_rows(self, example: TaggingExample) -> list[TaggingExample]:
        """The concept's own labelled rows the semantic judge may be shown (never the example's question)."""
        if self.demonstrations is None:
            return []
        if isinstance(self.demonstrations, dict):
            own = question_key(example.question)
            return [d for d in self.demonstrations.get(example.concept, []) if question_key(d.question) != own]
        return self.demonstrations.own_pool(example)

    async def _make_plan(self, vars: dict[str, Any]):
        """The planner's record, retried up to ``plan_attempts`` times on an LLM error."""
        for _ in range(self.cfg.plan_attempts):
            record = await self.planner.run(self.llm(self.planner.role), vars, tag="plan", mode=self.mode)
            if record.error_kind != "llm":
                break
        return record

    async def _plan(self, example: TaggingExample, trace: SampleTrace) -> tuple[Plan, int]:
        key = (example.definition, example.language)
        first = key not in self._plans
        if first:
            examples = self.planner_examples.for_definition(example.definition, example.language)
            vars = {"definition": example.definition, "language": example.language, "examples": examples}
            self._plans[key] = asyncio.ensure_future(self._make_plan(vars))
        task = self._plans[key]
        record = await asyncio.shield(task)
        if record.error_kind == "llm" and self._plans.get(key) is task:
            del self._plans[key]  # never share an error: the next question of the concept asks again
        trace.add(record, shared=not first)
        if record.ok:
            self.plan_truncations[key] = record.parsed.truncated
            return record.parsed, 0
        return Plan([SubConstraint("semantic", WHOLE_DEFINITION.get(example.language, WHOLE_DEFINITION["en"]))]), 1

    def numerical(self) -> dict[str, int]:
        """How the numerical sub-constraints were judged (``pipelines.tagging.numerical.NUMERICAL_COUNTS``)."""
        return dict(self.numerical_judge.counts)

    def truncation(self) -> dict[str, int]:
        """``{"plans", "truncated_plans", "dropped_sub_constraints"}`` over the plans made so far."""
        counts = list(self.plan_truncations.values())
        return {
            "plans": len(counts),
            "truncated_plans": sum(c > 0 for c in counts),
            "dropped_sub_constraints": sum(counts),
        }

    async def tag(self, example: TaggingExample, trace: SampleTrace) -> TeamVerdict:
        """The team's verdict on one pair; every agent's record goes to ``trace``."""
        solve_vars = {"question": example.question, "language": example.language}
        (plan, plan_failed), solved = await asyncio.gather(
            self._plan(example, trace),
            self.solver.run(self.llm(self.solver.role), solve_vars, tag="solve", mode=self.mode),
        )
        trace.add(solved)
        solution = solved.parsed.text if solved.ok else NO_SOLUTION.get(example.language, NO_SOLUTION["en"])
        outcomes = await asyncio.gather(
            *(self._judge(example, solution, i, c, trace) for i, c in enumerate(plan.constraints))
        )
        failures = plan_failed + (not solved.ok) + sum(o.error is not None for o in outcomes)
        return TeamVerdict(all(o.verdict for o in outcomes), list(outcomes), failures, solution, plan.truncated)

    async def _judge(
        self, example: TaggingExample, solution: str, index: int, constraint: SubConstraint, trace: SampleTrace
    ) -> ConstraintOutcome:
        if constraint.kind == "numerical":
            llm = self.llm(self.arg_extractor.role)
            outcome = await self.numerical_judge.judge(llm, example, solution, index, constraint, trace, mode=self.mode)
            if outcome.error is None or self.cfg.failure_policy == "no":
                return outcome
            fallback = await self._semantic(example, solution, index, constraint, trace)
            fallback.error = outcome.error + ("" if fallback.error is None else f"; then {fallback.error}")
            fallback.settled_by = "policy:semantic" if fallback.settled_by == "semantic_judge" else "policy:no"
            return fallback
        return await self._semantic(example, solution, index, constraint, trace)

    async def _semantic(
        self, example: TaggingExample, solution: str, index: int, constraint: SubConstraint, trace: SampleTrace
    ) -> ConstraintOutcome:
        demos = []
        if self.cfg.semantic_demonstrations:
            shipped = self.semantic_pairs.pair_for(example.definition, example.language)
            demos = semantic_examples(self.own_rows(example), shipped, example.definition)
        vars = {
            "definition": example.definition,
            "question": example.question,
            "solution": solution,
            "constraint": constraint.text,
            "demonstrations": demos,
            "language": example.language,
        }
        record = await self.semantic_judge.run(
            self.llm(self.semantic_judge.role), vars, tag=f"constraint-{index}", mode=self.mode
        )
        trace.add(record, constraint_index=index, constraint=constraint)
        if record.ok:
            return ConstraintOutcome(
                constraint.kind,
                constraint.text,
                record.parsed.verdict,
                "semantic_judge",
                reasoning=record.parsed.reasoning,
            )
        return ConstraintOutcome(
            constraint.kind, constraint.text, False, "policy:no", error=f"semantic_judge: {record.error}"
        )
