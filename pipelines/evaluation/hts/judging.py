"""HTS pairwise judging, as in the RAM2C paper: for each held-out (topic, student, student answer)
item, the replies of two systems (the system under test and its baseline, e.g. the tuned model vs
the base model, or GLM-P/R vs GLM-R) are compared per dimension (humanized communication,
teaching expertise, safety and ethics) by one or more judges.

Positions are **balanced, not coin-flipped**: per comparison, judge and dimension a seeded shuffle
puts the system's reply first (``A``) for exactly half of the items (one more or one fewer for an
odd count), and every judge gets its own order, so a position bias the judges share cannot pass for
agreement or preference (:func:`balanced_positions`). The judge's ``A``/``B``/``equal`` is mapped
back to an outcome for the system: ``better`` / ``equal`` / ``worse`` (4 / 2 / 0 points,
:mod:`pipelines.evaluation.hts.scoring`).

    judges = [Judge("glm4", runtime.for_role("hts_judge")), Judge("gpt4o", runtime.for_role("gpt"))]
    judgments, report = await judge_items(items, judges, seed=0, comparison="tuned_vs_base")
    scores = hts_scores(judgments)          # per dimension: score (50 = parity), kappa, ...

A judgment whose reply never parsed (or whose call failed) keeps ``outcome=None`` and ``ok=False``;
it is traced and counted, never scored.
"""

from __future__ import annotations

import asyncio
import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pipelines.agents import Agent, Runner, SampleTrace
from pipelines.evaluation.hts.agents.pairwise_judge import PairVerdict, load_criteria, make_pairwise_judge

DIMENSIONS: tuple[str, ...] = ("humanized", "teaching", "safety")
DIMENSION_LETTERS = {"humanized": "H", "teaching": "T", "safety": "S"}
Outcome = Literal["better", "equal", "worse"]
Position = Literal["A", "B"]


@dataclass(frozen=True)
class HTSItem:
    """One held-out item: the topic, the (simulated) student's profile and answer, and the two
    replies (``reply_system``: the system under test, ``reply_baseline``: what it is compared with)."""

    id: str
    topic: str
    student_answer: str
    reply_system: str
    reply_baseline: str
    language: str = "en"
    student: dict[str, Any] | None = None  # grade, traits, interest, reading_level (criterion 1.7)


@dataclass(frozen=True)
class Judge:
    """A named judge: an LLM (a model, or the same model with another seed in its params)."""

    name: str
    llm: Any


@dataclass
class Judgment:
    """One judge's decision on one item and dimension, mapped back to the system under test."""

    item_id: str
    dimension: str
    judge: str
    system_position: Position
    choice: str | None  # "A" | "B" | "equal", None when the reply never parsed
    outcome: Outcome | None
    ok: bool
    error: str | None = None
    tie: bool = False  # identical replies: "equal" without a judge call (not a verdict of the judge)

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Judgment:
        """A judgment back from :meth:`to_row` (extra keys in the row are ignored)."""
        fields = {name: row.get(name) for name in cls.__dataclass_fields__ if name != "tie"}
        return cls(**fields, tie=bool(row.get("tie")))


def normalised(text: str) -> str:
    """``text`` compared for a tie: Unicode NFKC, lower case, punctuation and symbols dropped,
    whitespace runs as one space."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(c for c in text if not unicodedata.category(c).startswith(("P", "S")))
    return re.sub(r"\s+", " ", text).strip()


def is_tie(item: HTSItem) -> bool:
    """The two replies are the same text once :func:`normalised`: a tie, no judge is asked."""
    return normalised(item.reply_system) == normalised(item.reply_baseline)


def balanced_positions(item_ids: Iterable[str], *, seed: int, salt: str = "") -> dict[str, Position]:
    """``{item id: position of the system's reply}``: ``A`` for half of the items, ``B`` for the
    other half (an odd count's last one by the same generator), shuffled by a generator seeded
    with ``seed`` and ``salt`` (the comparison, judge and dimension). The same ids in any order
    give the same assignment."""
    ids = sorted(set(item_ids))
    rng = random.Random(f"{seed}:{salt}")
    half = len(ids) // 2
    positions: list[Position] = ["A"] * half + ["B"] * half
    if len(ids) % 2:
        positions.append(rng.choice(("A", "B")))
    rng.shuffle(positions)
    return dict(zip(ids, positions, strict=True))


def outcome_of(choice: str, position: str) -> Outcome:
    """The judge's ``A``/``B``/``equal`` seen from the system's reply shown at ``position``."""
    if choice == "equal":
        return "equal"
    if choice not in ("A", "B") or position not in ("A", "B"):
        raise ValueError(f"choice {choice!r} / position {position!r} must be A, B (or equal)")
    return "better" if choice == position else "worse"


def arranged(item: HTSItem, position: str) -> tuple[str, str]:
    """(reply A, reply B) with the system's reply at ``position``."""
    if position == "A":
        return item.reply_system, item.reply_baseline
    return item.reply_baseline, item.reply_system


def judge_vars(item: HTSItem, dimension: str, position: str, *, reasoning: bool = True) -> dict[str, Any]:
    """What the judge template needs for one item, dimension and arrangement."""
    reply_a, reply_b = arranged(item, position)
    return {
        "reasoning": reasoning,
        "language": item.language,
        "criteria": load_criteria(item.language),
        "dimension": dimension,
        "topic": item.topic,
        "student": item.student,
        "student_answer": item.student_answer,
        "reply_a": reply_a,
        "reply_b": reply_b,
    }


async def judge_item(
    item: HTSItem,
    trace: SampleTrace,
    *,
    judges: Sequence[Judge],
    agent: Agent[PairVerdict],
    positions: dict[tuple[str, str], dict[str, Position]],
    dimensions: Sequence[str] = DIMENSIONS,
    mode: str = "text",
    reasoning: bool = True,
) -> list[Judgment]:
    """All judges on all dimensions of one item, concurrently; one trace row per call.
    ``positions[(judge, dimension)][item id]`` is where the system's reply is shown; ``mode`` is the
    agent's output mode (``text`` or ``json``); ``reasoning`` as the agent was made with. Replies that
    are the same text (:func:`is_tie`) are ties: ``equal`` for every judge and dimension, no call."""
    tie = is_tie(item)

    async def one(judge_index: int, judge: Judge, dimension: str) -> Judgment:
        position = positions[(judge.name, dimension)][item.id]
        if tie:
            return Judgment(item.id, dimension, judge.name, position, "equal", "equal", True, tie=True)
        # distinct sample indices (and tags) per judge: two judges on one model never share a cache entry
        record = await agent.run(
            judge.llm,
            judge_vars(item, dimension, position, reasoning=reasoning),
            sample_index=judge_index * agent.max_attempts,
            tag=f"hts:{judge.name}",
            mode=mode,
        )
        trace.add(record, judge=judge.name, dimension=dimension, system_position=position)
        choice = record.parsed.choice if record.ok else None
        outcome = outcome_of(choice, position) if choice else None
        return Judgment(item.id, dimension, judge.name, position, choice, outcome, record.ok, record.error)

    tasks = [one(j, judge, d) for d in dimensions for j, judge in enumerate(judges)]
    return list(await asyncio.gather(*tasks))


def check_judging(judges: Sequence[Judge], dimensions: Sequence[str]) -> None:
    """ValueError for an unknown dimension or judges without distinct names."""
    unknown = [d for d in dimensions if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"unknown HTS dimension(s) {unknown}; valid: {', '.join(DIMENSIONS)}")
    names = [j.name for j in judges]
    if not judges or len(set(names)) != len(names):
        raise ValueError(f"judges need distinct names, got {names}")


def assign_positions(
    items: Sequence[HTSItem], judges: Sequence[Judge], dimensions: Sequence[str], *, seed: int, comparison: str
) -> dict[tuple[str, str], dict[str, Position]]:
    """:func:`balanced_positions` per (judge, dimension) of one comparison."""
    ids = [i.id for i in items]
    return {
        (j.name, d): balanced_positions(ids, seed=seed, salt=f"{comparison}:{j.name}:{d}")
        for j in judges
        for d in dimensions
    }


def item_worker(
    items: Sequence[HTSItem],
    judges: Sequence[Judge],
    *,
    agent: Agent[PairVerdict],
    seed: int = 0,
    comparison: str = "",
    dimensions: Sequence[str] = DIMENSIONS,
    mode: str = "text",
    reasoning: bool = True,
):
    """``async worker(item, trace) -> [Judgment]`` for a runner or the harness: every judge on every
    dimension of one item, at the positions :func:`assign_positions` gives this comparison."""
    check_judging(judges, dimensions)
    positions = assign_positions(items, judges, dimensions, seed=seed, comparison=comparison)

    async def worker(item: HTSItem, trace: SampleTrace) -> list[Judgment]:
        return await judge_item(
            item,
            trace,
            judges=judges,
            agent=agent,
            positions=positions,
            dimensions=dimensions,
            mode=mode,
            reasoning=reasoning,
        )

    return worker


async def judge_items(
    items: Sequence[HTSItem],
    judges: Sequence[Judge],
    *,
    seed: int = 0,
    comparison: str = "",
    dimensions: Sequence[str] = DIMENSIONS,
    concurrency: int = 8,
    agent: Agent[PairVerdict] | None = None,
    mode: str = "text",
    reasoning: bool = True,
    progress: bool = False,
):
    """Judge every item with every judge on every dimension under one call limit.

    Returns ``(judgments, run_report)``: the flat list of :class:`Judgment` (input order; a
    sample that crashed contributes nothing and is in ``run_report.failures``) and the
    :class:`RunReport` whose trace rows go to the traces JSONL.
    """
    worker = item_worker(
        items,
        judges,
        agent=agent or make_pairwise_judge(reasoning=reasoning),
        seed=seed,
        comparison=comparison,
        dimensions=dimensions,
        mode=mode,
        reasoning=reasoning,
    )
    report = await Runner(concurrency, desc="HTS judging", progress=progress).run(
        items, worker, sample_id=lambda item: item.id
    )
    judgments = [j for result in report.results if result for j in result]
    return judgments, report
