"""HTS pairwise judging, as in the RAM2C paper: for each held-out (topic, student answer) item, a
reply of the model under test and one of a baseline are compared per dimension (humanized
communication, teaching expertise, safety and ethics) by one or more judges.

The two replies' positions are randomised per item with a seeded generator (``tuned_position``,
recorded in every judgment) and the judge's choice of ``A``/``B`` is mapped back to an outcome
for the model under test: ``better`` / ``equal`` / ``worse`` (scored 4 / 2 / 0 by
:mod:`pipelines.evaluation.hts.scoring`).

    judges = [Judge("glm4", runtime.for_role("hts_judge")), Judge("glm4-seed2", llm2)]
    judgments, report = await judge_items(items, judges, seed=0, concurrency=16)
    scores = hts_scores(judgments)          # per dimension: score (50 = parity), kappa, ...

A judgment whose reply never parsed (or whose call failed) keeps ``outcome=None`` and ``ok=False``;
it is traced and counted, never scored.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pipelines.agents import Agent, Runner, SampleTrace
from pipelines.evaluation.hts.agents.pairwise_judge import PairVerdict, load_criteria, make_pairwise_judge

DIMENSIONS: tuple[str, ...] = ("humanized", "teaching", "safety")
DIMENSION_LETTERS = {"humanized": "H", "teaching": "T", "safety": "S"}
Outcome = Literal["better", "equal", "worse"]


@dataclass(frozen=True)
class HTSItem:
    """One held-out item: the topic, the (simulated) student's answer and the two replies."""

    id: str
    topic: str
    student_answer: str
    reply_tuned: str
    reply_baseline: str
    language: str = "en"


@dataclass(frozen=True)
class Judge:
    """A named judge: an LLM (a model, or the same model with another seed in its params)."""

    name: str
    llm: Any


@dataclass
class Judgment:
    """One judge's decision on one item and dimension, mapped back to the model under test."""

    item_id: str
    dimension: str
    judge: str
    tuned_position: Literal["A", "B"]
    choice: str | None  # "A" | "B" | "equal", None when the reply never parsed
    outcome: Outcome | None
    ok: bool
    error: str | None = None

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Judgment:
        """A judgment back from :meth:`to_row` (extra keys in the row are ignored)."""
        return cls(**{name: row.get(name) for name in cls.__dataclass_fields__})


def tuned_position(item_id: str, seed: int, *, salt: str = "") -> Literal["A", "B"]:
    """Where the tuned reply is shown: a fair coin per item, fixed by ``seed`` (and ``salt``),
    independent of the order or number of items."""
    digest = hashlib.sha256(f"{seed}:{salt}:{item_id}".encode()).digest()
    return "A" if digest[0] & 1 == 0 else "B"


def outcome_of(choice: str, position: str) -> Outcome:
    """The judge's ``A``/``B``/``equal`` seen from the tuned reply shown at ``position``."""
    if choice == "equal":
        return "equal"
    if choice not in ("A", "B") or position not in ("A", "B"):
        raise ValueError(f"choice {choice!r} / position {position!r} must be A, B (or equal)")
    return "better" if choice == position else "worse"


def arranged(item: HTSItem, position: str) -> tuple[str, str]:
    """(reply A, reply B) with the tuned reply at ``position``."""
    if position == "A":
        return item.reply_tuned, item.reply_baseline
    return item.reply_baseline, item.reply_tuned


async def judge_item(
    item: HTSItem,
    trace: SampleTrace,
    *,
    judges: Sequence[Judge],
    agent: Agent[PairVerdict],
    dimensions: Sequence[str] = DIMENSIONS,
    seed: int = 0,
    mode: str = "text",
) -> list[Judgment]:
    """All judges on all dimensions of one item, concurrently; one trace row per call.
    ``mode`` is the agent's output mode (``text`` or ``json``, the latter with the harness's Agent)."""
    position = tuned_position(item.id, seed)
    reply_a, reply_b = arranged(item, position)

    async def one(judge_index: int, judge: Judge, dimension: str) -> Judgment:
        vars = {
            "language": item.language,
            "criteria": load_criteria(item.language),
            "dimension": dimension,
            "topic": item.topic,
            "student_answer": item.student_answer,
            "reply_a": reply_a,
            "reply_b": reply_b,
        }
        # distinct sample indices (and tags) per judge: two judges on one model never share a cache entry
        record = await agent.run(
            judge.llm, vars, sample_index=judge_index * agent.max_attempts, tag=f"hts:{judge.name}", mode=mode
        )
        trace.add(record, judge=judge.name, dimension=dimension, tuned_position=position)
        choice = record.parsed.choice if record.ok else None
        outcome = outcome_of(choice, position) if choice else None
        return Judgment(item.id, dimension, judge.name, position, choice, outcome, record.ok, record.error)

    tasks = [one(j, judge, d) for d in dimensions for j, judge in enumerate(judges)]
    return list(await asyncio.gather(*tasks))


async def judge_items(
    items: Sequence[HTSItem],
    judges: Sequence[Judge],
    *,
    seed: int = 0,
    dimensions: Sequence[str] = DIMENSIONS,
    concurrency: int = 8,
    agent: Agent[PairVerdict] | None = None,
    mode: str = "text",
    progress: bool = False,
):
    """Judge every item with every judge on every dimension under one call limit.

    Returns ``(judgments, run_report)``: the flat list of :class:`Judgment` (input order; a
    sample that crashed contributes nothing and is in ``run_report.failures``) and the
    :class:`RunReport` whose trace rows go to the traces JSONL.
    """
    unknown = [d for d in dimensions if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"unknown HTS dimension(s) {unknown}; valid: {', '.join(DIMENSIONS)}")
    names = [j.name for j in judges]
    if not judges or len(set(names)) != len(names):
        raise ValueError(f"judges need distinct names, got {names}")
    agent = agent or make_pairwise_judge()

    async def worker(item: HTSItem, trace: SampleTrace) -> list[Judgment]:
        return await judge_item(
            item, trace, judges=judges, agent=agent, dimensions=dimensions, seed=seed, mode=mode
        )

    report = await Runner(concurrency, desc="HTS judging", progress=progress).run(
        items, worker, sample_id=lambda item: item.id
    )
    judgments = [j for result in report.results if result for j in result]
    return judgments, report
