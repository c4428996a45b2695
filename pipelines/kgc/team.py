"""CooperKGC for one sentence: NER, RE and EE experts exchanging replicas over rounds (Algorithm 1).

    round 0:      every expert extracts alone            r_0^i = F(X | P_o, P_t, P_c)
    round 1..N:   every expert revises with the others'  r_t^i = F(X | D_{t-1}^i | P_v | P_o, P_t, P_c)
                  replicas of round t-1 and its own last answer
    replica:      d_t^i = S(r_t^i): the schema-conforming items of the reply, in the answer format,
                  without the reasoning (``simplification: false`` passes the raw reply instead:
                  its reasoning, its items outside the schema and its malformed tuples)

Every reply r_t, round 0's too, is a reasoning response that S simplifies (Algorithm 1 applies S
to r_0): in json mode every expert call's answer schema starts with a bounded ``reason``; in text
mode round 0 keeps the paper's prompt (a free reply may reason before its tuples), and
collaboration rounds ask for "credible reasons" as the paper's P_v does.
    final:        the items of the last round that keep the output format and the schema; items
                  that break them are dropped and counted (``malformed``, ``dropped``)

All experts of one round run concurrently (``asyncio.gather``); many sentences run at once under
the runner's limit. The expert of the sentence's own task takes the sentence's dataset schema (the
paper: "our team members' expert knowledge background is informed by the specifications of
OntoNotes5.0, NYT11-HRL and ACE05" when scoring OntoNotes); the others keep the language's
default backgrounds. An expert whose call fails keeps its previous answer (counted in ``failed``).
Every round of every expert is kept, so F1 can be read per round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from pipelines.agents import SampleTrace
from pipelines.config import ConfigError, StrictModel
from pipelines.kgc.agents.answer_bounds import DEFAULT_BOUNDS, AnswerBounds, bounds_for
from pipelines.kgc.agents.experts import DISPLAY, expert_role, expert_vars, make_expert
from pipelines.kgc.demos import DemoSelector, demonstration_vars
from pipelines.kgc.schema import Schema, Sentence, Task


class MemberConfig(StrictModel):
    """One expert: its task and the schema of its knowledge background (a dataset name of
    ``kgc.datasets`` or a bundled schema name); ``name`` is how peers see it."""

    task: Task
    schema_name: str
    name: str | None = None


def _members(*pairs: tuple[str, str]) -> list[MemberConfig]:
    return [MemberConfig(task=t, schema_name=s) for t, s in pairs]


class TeamConfig(StrictModel):
    """The team and the paper's ablation switches (the number of shots K comes per run, see
    :class:`CooperKGC`; ``ways`` is N of the N-way K-shot demonstrations, M = N x K).

    Json mode: ``bounds`` per language cap the answer schema (:class:`AnswerBounds`);
    ``json_types: names`` lists only the type names in the prompt (the answer schema enforces the
    types and each event type's roles), ``full`` the paper's list with head/tail types and roles."""

    members: dict[str, list[MemberConfig]] = Field(
        default_factory=lambda: {
            "en": _members(("ner", "conllpp"), ("re", "nyt11_hrl"), ("ee", "ace05")),
            "zh": _members(("ner", "msra"), ("re", "duie2"), ("ee", "duee1")),
        },
        description="expert knowledge backgrounds per language (task + schema_name each; the paper's defaults); the "
        "expert of a sentence's own task takes that dataset's schema",
    )
    rounds: int = Field(4, ge=0, description="collaboration rounds after round 0 (the paper: 4); every round is scored")
    simplification: bool = Field(
        True,
        description="replicas = schema-conforming results without reasoning (false: raw replies)",
    )
    background: bool = Field(
        True,
        description="opening statement + \"You are an excellent expert in ...\" (false: plain schema guidance)",
    )
    ways: int = Field(1, ge=1, description="N of N-way K-shot demonstrations (M = N x K nearest by embedding distance)")
    max_attempts: int = Field(2, ge=1, description="tries per call when a reply does not parse")
    retry_temperature: float | None = Field(
        0.7, ge=0.0, le=2.0,
        description="temperature of re-asks after a greedy attempt (null: keep)",
    )
    max_tokens: dict[Literal["ner", "re", "ee"], int] = Field(
        {},
        description="per-task caps, e.g. {ee: 128}; default: llm.sampling.max_tokens",
    )
    bounds: dict[str, AnswerBounds] = Field(
        default_factory=lambda: dict(DEFAULT_BOUNDS),
        description="json mode: caps written into the answer schema per language, so every schema-valid reply "
        "closes within max_tokens",
    )
    json_types: Literal["names", "full"] = Field(
        "names",
        description="json mode: type names only in the prompt (the answer schema enforces the types and each event "
        "type's roles) | full: the paper's list with head/tail types and roles",
    )


@dataclass
class ExpertRound:
    """One expert's answer in one round: kept items, its replica, and what was dropped."""

    expert: str
    task: str
    schema: str
    round: int
    items: list[Any] = field(default_factory=list)
    replica: str = "NO"
    reply: str | None = None
    reason: str = ""
    ok: bool = False
    error: str | None = None
    malformed: int = 0
    dropped: int = 0
    ungrounded: int = 0
    prompt: list[dict[str, str]] = field(default_factory=list, repr=False)


@dataclass
class TeamResult:
    """Every round of every expert for one sentence; ``primary`` is the scored expert."""

    sentence_id: str
    primary: str
    rounds: list[dict[str, ExpertRound]] = field(default_factory=list)
    corrections: dict[str, int] = field(default_factory=dict)
    final_f1: float | None = None  # the final answer's sentence F1 against gold (set by run.team_worker)

    def items_per_round(self) -> list[list[Any]]:
        return [r[self.primary].items for r in self.rounds]

    @property
    def final(self) -> ExpertRound:
        return self.rounds[-1][self.primary]

    @property
    def failed(self) -> int:
        return sum(not e.ok for r in self.rounds for e in r.values())


@dataclass
class Expert:
    name: str
    display: str
    task: str
    schema: Schema
    pool: str


class CooperKGC:
    """The team; ``llm_for(role)`` gives each expert role its LLM (``LLMRuntime.for_role``).

    ``schemas`` maps dataset and schema names to schemas; ``selector`` chooses ``ways x shots``
    demonstrations per expert; ``mode`` is ``text`` (the paper's tuples) or ``json`` (a schema per
    task); ``languages`` limits the start-up check of member schemas to the languages in the run;
    ``spans`` (json mode): ``sentence`` limits spans to the sentence's substrings, ``free`` does not."""

    def __init__(
        self,
        llm_for: Callable[[str], Any],
        cfg: TeamConfig,
        schemas: dict[str, Schema],
        *,
        selector: DemoSelector | None = None,
        shots: int = 0,
        mode: str = "text",
        languages: Iterable[str] | None = None,
        spans: str = "sentence",
    ):
        self.cfg, self.schemas, self.selector, self.mode, self.shots = cfg, schemas, selector, mode, shots
        self.spans = spans
        self._llm_for = llm_for
        self._llms: dict[str, Any] = {}
        self._agents: dict[tuple[str, str], Any] = {}
        for language, members in cfg.members.items():
            if languages is not None and language not in languages:
                continue
            for member in members:
                if member.schema_name not in schemas:
                    raise ConfigError(
                        f"kgc.team.members.{language}: schema {member.schema_name!r} is neither a dataset of "
                        f"kgc.datasets nor a bundled schema (have: {', '.join(sorted(schemas))}); add the dataset "
                        "to kgc.datasets (evaluate: false reads it only for its schema) or name one of these"
                    )

    def experts_for(self, sentence: Sentence) -> tuple[list[Expert], str]:
        """The sentence's experts (the one of its task on its dataset's schema) and the primary's name."""
        members = self.cfg.members.get(sentence.language)
        if not members:
            raise ValueError(f"no team members for language {sentence.language!r} in kgc.team.members")
        experts, primary = [], None
        names = DISPLAY.get(sentence.language, DISPLAY["en"])
        for index, member in enumerate(members):
            pool = member.schema_name
            if primary is None and member.task == sentence.task:
                pool = sentence.dataset
            name = f"{member.task}_{index}"
            display = member.name or names[member.task]
            experts.append(Expert(name, display, member.task, self.schemas[pool], pool))
            if primary is None and member.task == sentence.task:
                primary = name
        if primary is None:
            raise ValueError(f"the {sentence.language} team has no {sentence.task} expert for {sentence.id}")
        return experts, primary

    def _agent(self, expert: Expert):
        key = (expert.task, expert.schema.name)
        if key not in self._agents:
            self._agents[key] = make_expert(
                expert.task,
                expert.schema,
                bounds=bounds_for(expert.schema.language, self.cfg.bounds),
                reason=True,
                spans=self.spans,
                max_attempts=self.cfg.max_attempts,
                retry_temperature=self.cfg.retry_temperature,
                max_tokens=self.cfg.max_tokens.get(expert.task),
            )
        return self._agents[key]

    def llm(self, expert: Expert) -> Any:
        """The LLM of the expert's role (``<task>_expert``), made once."""
        role = f"{expert.task}_expert"
        if role not in self._llms:
            self._llms[role] = self._llm_for(role)
        return self._llms[role]

    def demonstrations(self, expert: Expert, sentence: Sentence) -> list[dict[str, str]]:
        m = self.cfg.ways * self.shots
        return demonstration_vars(self.selector, expert.pool, sentence.text, expert.task, m, mode=self.mode)

    async def ask(
        self, expert: Expert, sentence: Sentence, trace: SampleTrace, *, round: int, vars: dict, **extra
    ) -> ExpertRound:
        """One expert call (its answer gives its reasons, in every round), parsed and filtered to
        its schema; its trace row is added."""
        record = await self._agent(expert).run(
            self.llm(expert),
            vars,
            sample_index=extra.pop("sample_index", 0),
            tag=f"{expert.name}:r{round}",
            mode=self.mode,
        )
        out = ExpertRound(
            expert.name, expert.task, expert.schema.name, round, reply=record.reply, ok=record.ok, error=record.error
        )
        out.prompt = record.prompt
        if record.ok:
            role = expert_role(expert.task)
            out.items, out.dropped = role.schema_filter(record.parsed.items, expert.schema)
            out.malformed, out.reason = record.parsed.malformed, record.parsed.reason
            out.ungrounded = role.ungrounded(out.items, sentence.text)
            out.replica = role.answer_text(out.items, mode=self.mode)
        trace.add(
            record,
            round=round,
            expert=expert.name,
            task=expert.task,
            schema=expert.schema.name,
            kept=out.replica,
            dropped=out.dropped,
            malformed=out.malformed,
            ungrounded=out.ungrounded,
            **extra,
        )
        return out

    async def run(self, sentence: Sentence, trace: SampleTrace) -> TeamResult:
        """All rounds for one sentence; every expert call goes to ``trace``."""
        experts, primary = self.experts_for(sentence)
        result = TeamResult(sentence.id, primary)
        base = {
            "text": sentence.text,
            "language": sentence.language,
            "background": self.cfg.background,
            "type_names": self.mode == "json" and self.cfg.json_types == "names",
            "reason": True,  # every reply reasons; the replica drops it (Algorithm 1: d_0 = S(r_0))
        }
        demos = {e.name: self.demonstrations(e, sentence) for e in experts}
        first = await asyncio.gather(
            *(
                self.ask(e, sentence, trace, round=0, vars=expert_vars(e.schema, demonstrations=demos[e.name], **base))
                for e in experts
            )
        )
        result.rounds.append({e.name: r for e, r in zip(experts, first, strict=True)})
        for round in range(1, self.cfg.rounds + 1):
            last = result.rounds[-1]
            answers = await asyncio.gather(
                *(self._revise(e, experts, last, sentence, trace, round, demos, base) for e in experts)
            )
            result.rounds.append({e.name: r for e, r in zip(experts, answers, strict=True)})
        return result

    def _shown(self, answer: ExpertRound) -> str:
        if self.cfg.simplification or answer.reply is None:
            return answer.replica
        return answer.reply

    async def _revise(self, expert, experts, last, sentence, trace, round, demos, base) -> ExpertRound:
        peers = [{"name": e.display, "answer": self._shown(last[e.name])} for e in experts if e.name != expert.name]
        vars = expert_vars(
            expert.schema,
            demonstrations=demos[expert.name],
            round=round,
            last_answer=self._shown(last[expert.name]),
            peers=peers,
            **base,
        )
        answer = await self.ask(expert, sentence, trace, round=round, vars=vars)
        if not answer.ok:  # keep the previous answer: "copy the answers from the previous round"
            previous = last[expert.name]
            answer.items, answer.replica = list(previous.items), previous.replica
        return answer
