"""One expert group (T, P or E) refining the current reply, the paper's retrieval-augmented experts:

1. retrieve candidate documents for (topic, student's answer, current reply) from the group's
   knowledge bases (multi-query with RRF, :meth:`Retriever.retrieve` with ``group=``); the query's
   rewrites (of topic and answer, as in the paper's Fig. 4) are made once per turn by the team,
   while the drafter writes, and shared by the three groups (``TurnContext.rewrites``);
2. group reflection: every expert votes yes/no on every candidate along its own dimension, all
   experts at once: one ballot call per expert listing every candidate (``vote_call: per_expert``)
   or one call per (expert, candidate) (``per_document``); a document with at least
   ``accept_share`` yes votes is accepted (best share first). With ``selection: similarity`` the
   top retrieved documents are taken without votes, with ``rerank`` the cross-encoder's best;
3. each expert takes a different accepted reference (none when they run out), writes an explicit
   analysis of it against the student's answer, then its own revision: in one call whose reply
   holds both, analysis first (``expert_call: joint``), or an analyst call and then a reviser call
   given the analysis (``separate``); experts run concurrently;
4. one synthesis call merges the revisions into the group's reply.

Everything goes to the sample trace with ``turn``, ``group``, ``step``, ``expert`` and ``document``.
A failed vote (or a ballot that skips a document) counts as no; a failed analysis or revision drops
that expert's revision; a failed synthesis keeps the first revision; with no revision at all the
reply passes through unchanged.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pipelines.agents import Agent, AgentRecord, SampleTrace
from pipelines.ram2c.scenario import load_scenario
from pipelines.stats.validity import ValidityRule, rater_validity


@dataclass(frozen=True)
class Expert:
    id: str
    name: str
    dimension: str
    profile: str

    def to_vars(self) -> dict[str, str]:
        return {"name": self.name, "dimension": self.dimension, "profile": self.profile}


def group_experts(group: str, k: int, language: str) -> list[Expert]:
    """The first ``k`` persona profiles of ``group`` in ``language`` (distinct by construction)."""
    profiles = load_scenario()["experts"][group][:k]
    return [Expert(p["id"], p["name"][language], p["dimension"][language], p["profile"][language]) for p in profiles]


@dataclass(frozen=True)
class TurnContext:
    """What every group of one turn sees besides the current reply."""

    language: str
    book: str
    topic: str
    student: dict[str, Any]
    answer: str
    turn: int
    rewrites: list[str] | None = None  # shared query rewrites of this turn (None: the retriever rewrites)


@dataclass
class GroupOutcome:
    """What one group did in one turn (counts for the metrics; details are in the trace)."""

    group: str
    reply_in: str
    reply_out: str
    retrieved: int = 0
    accepted: int = 0
    votes: list[dict[str, Any]] = field(default_factory=list)
    ballots: list[dict[str, Any]] = field(default_factory=list)  # {"voter": LLM role, "ballot": ["yes", "no", ...]}
    failures: int = 0
    calls: int = 0
    tokens: int = 0
    synthesized: bool = False


def ballot_of(verdicts: Iterable[bool | None]) -> list[str | None]:
    """One voter's verdicts on a set of documents, in their order, as ``yes`` / ``no`` (None: failed)."""
    return [None if v is None else "yes" if v else "no" for v in verdicts]


def voter_validity(ballots: Iterable[tuple[str, list[str | None]]], rule: ValidityRule | None = None) -> dict:
    """Per voter (the LLM role that votes): :func:`rater_validity` of its ballots (a ballot: its
    verdicts on one set of documents, in order; the same ballot for every set is a constant voter,
    e.g. ``["yes", "no"]`` whatever the documents say) and ``accepted_share``, the share of the
    documents it voted yes on."""
    by_voter: dict[str, list[tuple]] = defaultdict(list)
    for voter, ballot in ballots:
        by_voter[voter].append(tuple(ballot))
    out = {}
    for voter, rows in by_voter.items():
        verdicts = [v for row in rows for v in row]
        accepted = sum(v == "yes" for v in verdicts) / len(verdicts) if verdicts else None
        out[voter] = {**rater_validity(rows, rule=rule), "accepted_share": accepted}
    return out


def tally(votes: dict[str, bool | None], threshold: float) -> tuple[float, bool]:
    """Share of yes votes among all experts (a missing vote counts as no) and whether it passes."""
    share = sum(v is True for v in votes.values()) / max(1, len(votes))
    return share, share >= threshold - 1e-9


class ExpertGroup:
    """Runs one group; ``llm_for(role)`` gives the LLMs, ``retriever.retrieve`` the documents."""

    def __init__(
        self,
        name: str,
        retrieval_group: str,
        experts: list[Expert],
        agents: dict[str, Agent],
        llm_for,
        retriever,
        *,
        candidates: int,
        accept_share: float,
        selection: str = "vote",
        reranker=None,
        mode: str = "text",
        vote_call: str = "per_expert",
        expert_call: str = "joint",
    ):
        if selection == "rerank" and reranker is None:
            raise ValueError("selection 'rerank' needs a reranker (retrieval.rerank.model)")
        self.name = name
        self.retrieval_group = retrieval_group
        self.experts = experts
        self.agents = agents
        self.llm_for = llm_for
        self.retriever = retriever
        self.candidates = candidates
        self.accept_share = accept_share
        self.selection = selection
        self.reranker = reranker
        self.mode = mode
        self.vote_call = vote_call
        self.expert_call = expert_call

    def _group_name(self, language: str) -> str:
        return load_scenario()["groups"][self.name][language]

    async def _run(self, agent: str, vars: dict, trace: SampleTrace, outcome: GroupOutcome, **extra) -> AgentRecord:
        tag = "/".join(str(extra[k]) for k in ("turn", "expert", "document") if extra.get(k) is not None)
        runner = self.agents[agent]  # "ballot:<n>" is agent "ballot" for n documents
        tag = f"{self.name}/{runner.name}/{tag}"
        record = await runner.run(self.llm_for(runner.role), vars, tag=tag, mode=self.mode)
        outcome.calls += record.calls
        outcome.tokens += record.usage["prompt_tokens"] + record.usage["completion_tokens"]
        trace.add(record, group=self.name, step=runner.name, **extra)
        return record

    async def _retrieve(self, ctx: TurnContext, reply: str, trace: SampleTrace, outcome: GroupOutcome) -> list[dict]:
        """Candidates for (topic, answer, current reply); the rewriter's call and the hits are traced."""
        query = f"{ctx.topic}\n{ctx.answer}\n{reply}"
        shared = {} if ctx.rewrites is None else {"rewrites": ctx.rewrites}
        result = await self.retriever.retrieve(
            query, group=self.retrieval_group, top_k=self.candidates, language=ctx.language, **shared
        )
        extra = {"turn": ctx.turn, "group": self.name}
        rewrite = getattr(result, "rewrite", None)
        if rewrite is not None:
            outcome.calls += rewrite.calls
            outcome.tokens += rewrite.usage["prompt_tokens"] + rewrite.usage["completion_tokens"]
            trace.add(rewrite, step="query_rewriter", **extra)
        trace.add_result(**result.trace_dict(), step="retrieval", **extra)
        return [hit.to_dict() for hit in result]

    async def _select(
        self, ctx: TurnContext, reply: str, docs: list[dict], trace: SampleTrace, outcome: GroupOutcome
    ) -> list[dict]:
        k = len(self.experts)
        if self.selection == "similarity":
            return docs[:k]
        if self.selection == "rerank":
            scores = await asyncio.to_thread(
                self.reranker.score, f"{ctx.topic}\n{ctx.answer}", [d["text"] for d in docs]
            )
            for doc, score in zip(docs, scores, strict=True):
                doc["scores"]["rerank"] = round(float(score), 6)
            return sorted(docs, key=lambda d: -d["scores"]["rerank"])[:k]
        votes = await self._votes(ctx, reply, docs, trace, outcome)
        accepted = []
        for i, doc in enumerate(docs):
            doc_votes = {e.id: votes[e.id][i] for e in self.experts}
            share, ok = tally(doc_votes, self.accept_share)
            outcome.failures += sum(v is None for v in doc_votes.values())
            outcome.votes.append({"document": doc["id"], "votes": doc_votes, "share": round(share, 4), "accepted": ok})
            if ok:
                accepted.append((-share, i, doc))
        trace.add_result(
            "reflection",
            self.name,
            result={"threshold": self.accept_share, "documents": outcome.votes},
            turn=ctx.turn,
            group=self.name,
            step="reflection",
        )
        return [doc for _, _, doc in sorted(accepted, key=lambda t: t[:2])]

    async def _votes(
        self, ctx: TurnContext, reply: str, docs: list[dict], trace: SampleTrace, outcome: GroupOutcome
    ) -> dict[str, list[bool | None]]:
        """Every expert's verdict on every document (None: failed or skipped), all calls at once."""
        base = {
            "topic": ctx.topic,
            "answer": ctx.answer,
            "reply": reply,
            "language": ctx.language,
            "group_name": self._group_name(ctx.language),
        }
        if self.vote_call == "per_expert":
            ballot = f"ballot:{len(docs)}"
            records = await asyncio.gather(
                *(
                    self._run(
                        ballot,
                        {**base, "expert": e.to_vars(), "documents": [d["text"] for d in docs]},
                        trace,
                        outcome,
                        turn=ctx.turn,
                        expert=e.id,
                        documents=[d["id"] for d in docs],
                    )
                    for e in self.experts
                )
            )
            failed = [None] * len(docs)
            verdicts = {e.id: list(r.parsed) if r.ok else failed for e, r in zip(self.experts, records, strict=True)}
            role = self.agents[ballot].role
            outcome.ballots += [{"voter": role, "ballot": ballot_of(v)} for v in verdicts.values() if v is not failed]
            return verdicts
        jobs = [
            self._run(
                "voter",
                {**base, "expert": e.to_vars(), "document": d["text"]},
                trace,
                outcome,
                turn=ctx.turn,
                expert=e.id,
                document=d["id"],
            )
            for e in self.experts
            for d in docs
        ]
        records = await asyncio.gather(*jobs)
        n = len(docs)
        verdicts = {
            e.id: [r.parsed if r.ok else None for r in records[j * n : (j + 1) * n]] for j, e in enumerate(self.experts)
        }
        role = self.agents["voter"].role
        outcome.ballots += [{"voter": role, "ballot": ballot_of(v)} for v in verdicts.values()]
        return verdicts

    async def _expert(
        self, ctx: TurnContext, reply: str, expert: Expert, reference: dict | None, trace: SampleTrace, outcome
    ) -> str | None:
        doc_id = reference["id"] if reference else None
        base = {
            "topic": ctx.topic,
            "answer": ctx.answer,
            "reply": reply,
            "student": ctx.student,
            "expert": expert.to_vars(),
            "group_name": self._group_name(ctx.language),
            "language": ctx.language,
        }
        extra = {"turn": ctx.turn, "expert": expert.id, "document": doc_id}
        with_reference = {**base, "reference": reference["text"] if reference else None}
        if self.expert_call == "joint":
            both = await self._run("analyst_reviser", with_reference, trace, outcome, **extra)
            if not both.ok:
                outcome.failures += 1
                return None
            return both.parsed["reply"]
        analysis = await self._run("analyst", with_reference, trace, outcome, **extra)
        if not analysis.ok:
            outcome.failures += 1
            return None
        revision = await self._run("reviser", {**base, "analysis": analysis.parsed}, trace, outcome, **extra)
        if not revision.ok:
            outcome.failures += 1
            return None
        return revision.parsed

    async def refine(self, ctx: TurnContext, reply: str, trace: SampleTrace) -> GroupOutcome:
        """The group's reply to the student for this turn (see the module docstring)."""
        outcome = GroupOutcome(self.name, reply, reply)
        docs = await self._retrieve(ctx, reply, trace, outcome)
        outcome.retrieved = len(docs)
        accepted = await self._select(ctx, reply, docs, trace, outcome) if docs else []
        outcome.accepted = len(accepted)
        references = [accepted[i] if i < len(accepted) else None for i in range(len(self.experts))]
        revisions = await asyncio.gather(
            *(self._expert(ctx, reply, e, ref, trace, outcome) for e, ref in zip(self.experts, references, strict=True))
        )
        revisions = [r for r in revisions if r]
        if not revisions:
            return outcome
        vars = {
            "topic": ctx.topic,
            "answer": ctx.answer,
            "student": ctx.student,
            "revisions": revisions,
            "language": ctx.language,
        }
        merged = await self._run("synthesizer", vars, trace, outcome, turn=ctx.turn)
        if merged.ok:
            outcome.reply_out, outcome.synthesized = merged.parsed, True
        else:
            outcome.failures += 1
            outcome.reply_out = revisions[0]
        return outcome
