"""The RAM2C team for one dialogue: a simulated student, the drafting model, and the T -> P -> E
expert groups, for up to ``turns`` turns.

    turn t:  student answers (the topic, or the previous final reply)     -> A
             drafter replies to the pair's prompt (scenario + history + A) -> R2 (rejected)
               at the same time: the query rewriter rephrases (topic, A) once for all groups
             T group refines R2, P group refines T's reply, E group refines P's -> R1 (chosen)

The prompt of the pair is exactly what the drafter saw: the system message (book, topic, student
profile), the earlier turns (student answers and chosen replies) and the latest answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.llm.types import Message
from pipelines.ram2c.agents import make_agents
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.groups import ExpertGroup, GroupOutcome, TurnContext, group_experts
from pipelines.ram2c.students import Persona
from pipelines.ram2c.topics import Topic, TopicPlan


@dataclass(frozen=True)
class DialoguePlan:
    id: str
    topic: Topic
    persona: Persona
    language: str


@dataclass
class Turn:
    turn: int
    prompt: list[Message]
    answer: str
    rejected: str
    chosen: str
    groups: list[GroupOutcome] = field(default_factory=list)


@dataclass
class Dialogue:
    id: str
    topic: str
    persona: dict[str, Any]
    turns: list[Turn] = field(default_factory=list)
    failures: int = 0
    stopped: str | None = None
    calls: int = 0
    tokens: int = 0


class Ram2cTeam:
    """Topics and dialogues; ``llm_for(role)`` gives each role its LLM (``LLMRuntime.for_role``)."""

    def __init__(self, cfg: Ram2cConfig, llm_for: Callable[[str], Any], retriever, *, reranker=None):
        self.cfg = cfg
        self.agents = make_agents(
            max_tokens=dict(cfg.max_tokens),
            ballot_sizes=cfg.reflection.candidates,
            analysis_chars=cfg.analysis_chars,
            max_attempts=cfg.max_attempts,
            retry_temperature=cfg.retry_temperature,
        )
        self.retriever = retriever
        self._llms: dict[str, Any] = {}
        self._llm_for = llm_for
        self.groups = [
            ExpertGroup(
                g.name,
                g.retrieval_group,
                group_experts(g.name, cfg.experts(), cfg.language),
                self.agents,
                self.llm,
                retriever,
                candidates=cfg.reflection.candidates,
                accept_share=cfg.reflection.accept_share,
                selection=cfg.ablation.selection,
                reranker=reranker,
                mode=cfg.output_mode,
                vote_call=cfg.reflection.vote_call,
                expert_call=cfg.expert_call,
            )
            for g in cfg.active_groups()
        ]

    def llm(self, role: str) -> Any:
        if role not in self._llms:
            self._llms[role] = self._llm_for(role)
        return self._llms[role]

    async def write_topic(self, plan: TopicPlan, trace: SampleTrace, *, avoid: list[str]) -> Topic | None:
        """One discussion question for ``plan`` (None when the reply never parsed)."""
        agent = self.agents["topic_writer"]
        record = await agent.run(
            self.llm(agent.role), plan.vars(self.cfg.language, avoid), tag="topic", mode=self.cfg.output_mode
        )
        trace.add(record, step="topic", passage=plan.passage.id, level=plan.level, direction=plan.direction)
        return Topic(plan, record.parsed) if record.ok else None

    async def dialogue(self, plan: DialoguePlan, trace: SampleTrace) -> Dialogue:
        """Up to ``turns`` turns of (A, R2, R1); a failed student or drafter call ends the dialogue."""
        lang = plan.language
        book, topic, student = plan.topic.plan.passage.book, plan.topic.question, plan.persona.to_vars()
        result = Dialogue(plan.id, topic, student)
        history: list[Message] = []
        teacher_reply = None
        for turn in range(1, self.cfg.turns + 1):
            said = await self._step(
                result,
                "student",
                {"book": book, "student": student, "topic": topic, "teacher_reply": teacher_reply, "language": lang},
                trace,
                turn,
            )
            if not said.ok:
                result.failures, result.stopped = result.failures + 1, f"student failed in turn {turn}"
                break
            answer = said.parsed
            draft_vars = {
                "book": book,
                "topic": topic,
                "student": student,
                "answer": answer,
                "history": history,
                "language": lang,
            }
            drafted, rewrites = await asyncio.gather(
                self._step(result, "drafter", draft_vars, trace, turn),
                self.rewrite(result, topic, answer, trace, turn),
            )
            if not drafted.ok:
                result.failures, result.stopped = result.failures + 1, f"drafter failed in turn {turn}"
                break
            ctx = TurnContext(lang, book, topic, student, answer, turn, rewrites)
            reply, outcomes = await self.refine(ctx, drafted.parsed, trace, result)
            result.turns.append(Turn(turn, drafted.prompt, answer, drafted.parsed, reply, outcomes))
            history = history + [{"role": "user", "content": answer}, {"role": "assistant", "content": reply}]
            teacher_reply = reply
        return result

    async def refine(
        self, ctx: TurnContext, draft: str, trace: SampleTrace, result: Dialogue
    ) -> tuple[str, list[GroupOutcome]]:
        """One turn's refinement of ``draft``: T -> P -> E, each group refining the previous group's
        reply; returns (the last group's reply, every group's outcome) and counts calls, tokens and
        failures into ``result``. The dialogue runs it after its drafter; the evaluation runs it on a
        reference model's draft (the paper's GLM-R)."""
        reply, outcomes = draft, []
        for group in self.groups:
            outcome = await group.refine(ctx, reply, trace)
            outcomes.append(outcome)
            result.failures += outcome.failures
            result.calls += outcome.calls
            result.tokens += outcome.tokens
            reply = outcome.reply_out
        return reply, outcomes

    async def rewrite(
        self, result: Dialogue, topic: str, answer: str, trace: SampleTrace, turn: int
    ) -> list[str] | None:
        """The turn's rewrites of (topic, answer), shared by every group (None: the retriever has no
        rewriter); the call is traced and counted into ``result``."""
        rewriter = getattr(self.retriever, "rewriter", None)
        if rewriter is None:
            return None
        outcome = await rewriter.run(f"{topic}\n{answer}")
        if outcome.record is not None:
            trace.add(outcome.record, step="query_rewriter", turn=turn)
            result.calls += outcome.record.calls
            result.tokens += outcome.record.usage["prompt_tokens"] + outcome.record.usage["completion_tokens"]
        return list(outcome.rewrites)

    async def _step(self, result: Dialogue, name: str, vars: dict, trace: SampleTrace, turn: int):
        agent = self.agents[name]
        record = await agent.run(self.llm(agent.role), vars, tag=f"{name}/{turn}", mode=self.cfg.output_mode)
        trace.add(record, step=name, turn=turn)
        result.calls += record.calls
        result.tokens += record.usage["prompt_tokens"] + record.usage["completion_tokens"]
        return record
