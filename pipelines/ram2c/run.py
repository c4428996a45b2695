"""Stage ``generate_ram2c`` as one function: passages -> topics -> dialogues through the T/P/E
groups -> quality gates -> exports and metrics, both phases on the generation harness.

Outputs under ``outputs.generated_dir`` (streamed as dialogues finish, renamed into place at the
end): ``dpo.jsonl``, ``sft.jsonl``, ``dialogues.jsonl`` (each dialogue end to end: topic, student,
every turn's prompt, answer, rejected and chosen reply and per-group outcome with every vote),
``dropped.jsonl`` (gated pairs with their reason), ``traces.jsonl`` (every LLM call, retrieval,
vote tally, analysis, revision and synthesis with ``turn``/``group``/``step``/``expert``/``document``),
``predictions.jsonl`` (one summary row per dialogue); then ``preference/`` (datasets) and
``llamafactory/``; ``topics/`` holds the topic phase (``predictions.jsonl`` = every written topic,
``traces.jsonl``, ``dropped.jsonl``). Reports: ``usage.json``, ``failures.json`` (and ``topics/``).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.agents import SampleTrace, to_jsonable
from pipelines.agents.generation import run_runtime
from pipelines.agents.harness import (
    EmptyEvaluation,
    GenerationOutputs,
    HarnessReport,
    System,
    SystemReport,
    run_systems,
)
from pipelines.agents.shards import params_fingerprint, roundtrip, write_manifest
from pipelines.io import read_jsonl, write_jsonl_atomic
from pipelines.llm.client import LLMRuntime
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.exports import dpo_rows, sft_rows, write_final_exports
from pipelines.ram2c.gates import apply_gates
from pipelines.ram2c.groups import voter_validity
from pipelines.ram2c.scenario import theme_names
from pipelines.ram2c.sources import load_passages
from pipelines.ram2c.students import make_personas
from pipelines.ram2c.team import Dialogue, DialoguePlan, Ram2cTeam
from pipelines.ram2c.topics import Topic, select_topics, topic_plans
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.retrieval.rerank import CrossEncoderReranker
from pipelines.retrieval.service import open_retriever

log = logging.getLogger(__name__)


@dataclass
class DialogueOutcome:
    """A finished dialogue and its pairs split by the quality gates."""

    dialogue: Dialogue
    kept: list[dict] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def pairs_of(dialogue: Dialogue, language: str) -> list[dict]:
    """One (prompt, chosen, rejected) pair per finished turn."""
    return [
        {
            "id": f"{dialogue.id}-t{t.turn}",
            "language": language,
            "prompt": t.prompt,
            "chosen": t.chosen,
            "rejected": t.rejected,
            "meta": {
                "dialogue": dialogue.id,
                "turn": t.turn,
                "topic": dialogue.topic,
                "student": dialogue.persona["id"],
            },
        }
        for t in dialogue.turns
    ]


def summary(outcome: DialogueOutcome | None) -> dict[str, Any] | None:
    """The small per-dialogue record the metrics are made of (the harness keeps one per dialogue)."""
    if outcome is None:
        return None
    d = outcome.dialogue
    groups: dict[str, Counter] = defaultdict(Counter)
    for t in d.turns:
        for g in t.groups:
            c = groups[g.group]
            c["turns"] += 1
            c["retrieved"] += g.retrieved
            c["accepted"] += g.accepted
            c["votes"] += sum(len(v["votes"]) for v in g.votes)
            c["yes_votes"] += sum(x is True for v in g.votes for x in v["votes"].values())
            c["llm_calls"] += g.calls
            c["tokens"] += g.tokens
            c["failures"] += g.failures
            c["synthesized"] += g.synthesized
    return {
        "turns": len(d.turns),
        "stopped": d.stopped,
        "failures": d.failures,
        "llm_calls": d.calls,
        "tokens": d.tokens,
        "groups": {k: dict(v) for k, v in groups.items()},
        "ballots": [[b["voter"], b["ballot"]] for t in d.turns for g in t.groups for b in g.ballots],
        "kept": [p["id"] for p in outcome.kept],
        "dropped": {p["id"]: p["reason"] for p in outcome.dropped},
        "chosen_chars": [len(p["chosen"]) for p in outcome.kept],
        "rejected_chars": [len(p["rejected"]) for p in outcome.kept],
    }


def aggregate(summaries: list[dict | None]) -> dict[str, Any]:
    """Dialogue metrics: pairs kept and dropped by reason, retrieval and votes per group, each voter
    role's ballot validity (``voters``: a constant voter is flagged), calls and tokens per dialogue
    and per group, mean length of chosen and rejected."""
    done = [s for s in summaries if s is not None]
    n = max(1, len(done))
    groups: dict[str, Counter] = defaultdict(Counter)
    for s in done:
        for name, counts in s["groups"].items():
            groups[name].update(counts)
    per_group = {}
    for name, c in groups.items():
        turns = max(1, c["turns"])
        per_group[name] = {
            **dict(c),
            "retrieved_per_turn": round(c["retrieved"] / turns, 3),
            "accepted_per_turn": round(c["accepted"] / turns, 3),
            "accepted_share": round(c["accepted"] / max(1, c["retrieved"]), 4),
            "yes_share": round(c["yes_votes"] / max(1, c["votes"]), 4),
            "llm_calls_per_turn": round(c["llm_calls"] / turns, 3),
            "tokens_per_turn": round(c["tokens"] / turns, 1),
        }
    chosen = [x for s in done for x in s["chosen_chars"]]
    rejected = [x for s in done for x in s["rejected_chars"]]
    calls, tokens = sum(s["llm_calls"] for s in done), sum(s["tokens"] for s in done)
    return {
        "dialogues_failed": len(summaries) - len(done),
        "dialogues_stopped": sum(s["stopped"] is not None for s in done),
        "turns": sum(s["turns"] for s in done),
        "pairs_kept": sum(len(s["kept"]) for s in done),
        "pairs_dropped": sum(len(s["dropped"]) for s in done),
        "dropped_by_reason": dict(sorted(Counter(r for s in done for r in s["dropped"].values()).items())),
        "failed_steps": sum(s["failures"] for s in done),
        "llm_calls_per_dialogue": round(calls / n, 3),
        "tokens_per_dialogue": round(tokens / n, 1),
        "groups": per_group,
        "voters": voter_validity((voter, ballot) for s in done for voter, ballot in s.get("ballots", [])),
        "mean_chars_chosen": round(sum(chosen) / len(chosen), 1) if chosen else 0.0,
        "mean_chars_rejected": round(sum(rejected) / len(rejected), 1) if rejected else 0.0,
    }


def check_retrieval_groups(cfg: Ram2cConfig, retrieval_cfg: RetrievalConfig) -> None:
    """ValueError naming the fix when an active group reads a retrieval group ``retrieval.groups`` lacks."""
    unknown = [g.retrieval_group for g in cfg.active_groups() if g.retrieval_group not in retrieval_cfg.groups]
    if unknown:
        raise ValueError(f"ram2c.groups name retrieval groups {unknown} missing from retrieval.groups; add them")


def team_retrieval_config(cfg: Ram2cConfig, retrieval_cfg: RetrievalConfig) -> RetrievalConfig:
    """``retrieval_cfg`` with ``ram2c.n_rewrites`` over ``retrieval.n_rewrites`` when it is set."""
    if cfg.n_rewrites is None:
        return retrieval_cfg
    return retrieval_cfg.model_copy(update={"n_rewrites": cfg.n_rewrites})


def open_team_retrieval(
    cfg: Ram2cConfig,
    build_cfg: BuildKBConfig,
    retrieval_cfg: RetrievalConfig,
    *,
    rewriter_llm: Any,
    root: Path,
    retriever: Any = None,
    reranker: Any = None,
) -> tuple[Any, Any]:
    """``(retriever, reranker)`` of the team: the knowledge base of ``build_cfg`` with ``rewriter_llm``
    as the query rewriter (``retrieval_cfg`` as :func:`team_retrieval_config` gives it), and the
    cross-encoder when ``ablation.selection`` is ``rerank`` (else None); ones passed in are kept."""
    if retriever is None:
        retriever = open_retriever(build_cfg, retrieval_cfg, llm=rewriter_llm, root=root)
    if reranker is None and cfg.ablation.selection == "rerank":
        rerank_cfg = retrieval_cfg.rerank.model_copy(update={"model": str(root / retrieval_cfg.rerank.model)})
        reranker = CrossEncoderReranker(rerank_cfg)
    return retriever, reranker


async def generate_ram2c_async(
    cfg: Ram2cConfig,
    build_cfg: BuildKBConfig,
    retrieval_cfg: RetrievalConfig,
    *,
    root: Path | str = ".",
    runtime: LLMRuntime | None = None,
    retriever=None,
    reranker=None,
) -> dict[str, Any]:
    """Run the stage on the final sections (``retrieval_cfg`` as :func:`team_retrieval_config` gives
    it, which :meth:`pipelines.ram2c.interface.RAM2C.configure` does at set-up); a runtime passed in
    is used and left open, one made here is closed."""
    root = Path(root)
    check_retrieval_groups(cfg, retrieval_cfg)
    if retriever is None:
        check_rewrites_configured(cfg, retrieval_cfg)
    passages = [p for s in cfg.sources if s.language == cfg.language for p in load_passages(s, root)]
    async with run_runtime(cfg.llm, runtime) as runtime:
        await runtime.preflight(schema=cfg.output_mode == "json")
        retriever, reranker = open_team_retrieval(
            cfg,
            build_cfg,
            retrieval_cfg,
            rewriter_llm=runtime.for_role("query_rewriter"),
            root=root,
            retriever=retriever,
            reranker=reranker,
        )
        fingerprint = params_fingerprint(cfg, build_cfg, retrieval_cfg)
        return await _generate(cfg, root, runtime, retriever, reranker, passages, fingerprint=fingerprint)


def check_rewrites_configured(cfg: Ram2cConfig, retrieval_cfg: RetrievalConfig) -> None:
    """ValueError naming the fix when ``retrieval_cfg`` is not the configured one (``ram2c.n_rewrites`` set
    and not in it): the run would query with other rewrites than the params say."""
    if cfg.n_rewrites is not None and retrieval_cfg.n_rewrites != cfg.n_rewrites:
        raise ValueError(
            f"ram2c.n_rewrites is {cfg.n_rewrites} but the retrieval section passed has n_rewrites "
            f"{retrieval_cfg.n_rewrites}; pass team_retrieval_config(ram2c, retrieval) (RAM2C.configure does)"
        )


@dataclass
class TopicPhase:
    """The topic phase's result: the topics planned, those written, and the harness report."""

    plans: list
    written: list[Topic]
    report: HarnessReport


async def _write_topics(cfg: Ram2cConfig, team: Ram2cTeam, *, runtime, passages, outputs) -> TopicPhase:
    """Plan ``dialogues * topics.oversample`` topics over the passages and write each through the
    harness (into ``topics/`` of both folders); EmptyEvaluation when none was written."""
    out, rep = Path(outputs.generated_dir), Path(outputs.reports_dir)
    avoid = theme_names(cfg.topics.excluded_themes, cfg.language)
    plans = topic_plans(passages, cfg.topics, math.ceil(cfg.dialogues * cfg.topics.oversample))

    async def topic_worker(plan, trace: SampleTrace) -> Topic | None:
        return await team.write_topic(plan, trace, avoid=avoid)

    def topic_row(p, v):
        return {
            "id": f"topic-{p.index}",
            "passage": p.passage.id,
            "level": p.level,
            "direction": p.direction,
            "question": v["topic_writer"],
        }

    report = await run_systems(
        plans,
        [System("topic_writer", topic_worker, prediction=lambda t: t.question if t else None)],
        accounting=runtime.accounting,
        outputs=GenerationOutputs(generated_dir=str(out / "topics"), reports_dir=str(rep / "topics")),
        sample_id=lambda p: f"topic-{p.index}",
        prediction_row=topic_row,
        desc="ram2c topics",
        # no topic written at all is reported below, naming the cause
        **(cfg.harness_options() | {"max_unparseable_share": 1.0}),
    )
    questions = report.systems["topic_writer"].predictions
    written = [Topic(p, q) for p, q in zip(plans, questions, strict=True) if q]
    if plans and not written:
        raise EmptyEvaluation(no_topics_message(report.systems["topic_writer"], rep / "topics"))
    return TopicPhase(plans, written, report)


async def _plan_dialogues(cfg: Ram2cConfig, written: list[Topic], *, retriever, outputs) -> tuple[list, list[dict]]:
    """``(dialogue plans, dropped topics)``: the written topics deduplicated and selected (the dropped
    ones into ``topics/dropped.jsonl``), each with a seeded student persona."""
    embed = lambda texts: unit_rows(retriever.embedder.encode_queries(texts).dense)  # noqa: E731
    topics, dropped_topics = await asyncio.to_thread(
        select_topics, written, embed, cfg.topics, cfg.dialogues, language=cfg.language
    )
    write_jsonl_atomic(Path(outputs.generated_dir) / "topics" / "dropped.jsonl", dropped_topics)
    personas = make_personas(len(topics), cfg.language, seed=cfg.students.seed)
    plans = [DialoguePlan(f"d{i}", t, p, cfg.language) for i, (t, p) in enumerate(zip(topics, personas, strict=True))]
    return plans, dropped_topics


def _dialogue_exports() -> dict[str, Any]:
    """The export files of the dialogue phase, from each dialogue's gated outcome."""

    def first(results: dict) -> DialogueOutcome | None:
        return results["ram2c"]

    return {
        "dpo.jsonl": lambda plan, r: dpo_rows(first(r).kept) if first(r) else [],
        "sft.jsonl": lambda plan, r: sft_rows(first(r).kept) if first(r) else [],
        "dialogues.jsonl": lambda plan, r: [to_jsonable(first(r).dialogue)] if first(r) else [],
        "dropped.jsonl": lambda plan, r: first(r).dropped if first(r) else [],
    }


async def _run_dialogues(cfg: Ram2cConfig, team: Ram2cTeam, *, runtime, plans: list, outputs) -> HarnessReport:
    """Each planned dialogue through the T/P/E groups and the quality gates, on the harness (this
    shard's dialogues only)."""

    async def worker(plan: DialoguePlan, trace: SampleTrace) -> DialogueOutcome:
        dialogue = await team.dialogue(plan, trace)
        kept, dropped, _ = apply_gates(pairs_of(dialogue, cfg.language), cfg.gates)
        gate = {"kept": [p["id"] for p in kept], "dropped": {p["id"]: p["reason"] for p in dropped}}
        trace.add_result("gates", "quality", result=gate, ok=True, step="gates")
        return DialogueOutcome(dialogue, kept, dropped)

    return await run_systems(
        plans,
        [System("ram2c", worker, prediction=summary, failed_subtasks=lambda o: o.dialogue.failures if o else 1)],
        accounting=runtime.accounting,
        outputs=outputs,
        sample_id=lambda d: d.id,
        prediction_row=lambda d, v: {
            "id": d.id,
            "topic": d.topic.question,
            "student": d.persona.id,
            **(v["ram2c"] or {}),
        },
        exports=_dialogue_exports(),
        desc="ram2c dialogues",
        shard=cfg.shard,
        **cfg.harness_options(),
    )


async def _generate(
    cfg: Ram2cConfig, root: Path, runtime, retriever, reranker, passages, *, fingerprint: str
) -> dict[str, Any]:
    """Topics, then dialogues, then the metrics (and, for a shard, its manifest)."""
    team = Ram2cTeam(cfg, runtime.for_role, retriever, reranker=reranker)
    outputs = cfg.shard.outputs(cfg.outputs, root)  # every shard writes every topic (see finish_ram2c)
    topics = await _write_topics(cfg, team, runtime=runtime, passages=passages, outputs=outputs)
    dialogue_plans, dropped_topics = await _plan_dialogues(cfg, topics.written, retriever=retriever, outputs=outputs)
    report = await _run_dialogues(cfg, team, runtime=runtime, plans=dialogue_plans, outputs=outputs)
    context = {
        "books": sorted({p.book for p in passages}),
        "passages": len(passages),
        "topics_planned": len(topics.plans),
        "topics_written": len(topics.written),
        "topics_dropped": dict(Counter(d["reason"].split(":")[0] for d in dropped_topics)),
        "dialogues": len(dialogue_plans),
    }
    counters = {"topics_wall_s": topics.report.wall_s, "dialogues_wall_s": report.wall_s}
    metrics = finish_ram2c(cfg, outputs, report, context=roundtrip(context), counters=counters)
    shared = [f"{base}topics/{name}" for base in ("=generated:", "generated:") for name in TOPIC_FILES[base]]
    write_manifest(
        cfg.shard,
        outputs,
        report,
        fingerprint=fingerprint,
        context=context,
        counters=counters,
        shared=[*shared, "reports:topics/usage.json", "reports:topics/failures.json"],
    )
    return metrics


# The topic phase (not per dialogue) runs whole in every shard; the merge takes shard 0's files,
# and the written and selected topics must be byte-identical in every shard.
TOPIC_FILES = {"=generated:": ("predictions.jsonl", "dropped.jsonl"), "generated:": ("traces.jsonl",)}


def finish_ram2c(
    cfg: Ram2cConfig, outputs: GenerationOutputs, report: Any, *, context: dict, counters: dict
) -> dict[str, Any]:
    """Metrics from ``<generated_dir>/predictions.jsonl`` (one summary row per dialogue), the rows
    written per file, ``context`` (passages, topics, dialogues planned) and ``counters`` (wall
    times); writes ``preference/`` and ``llamafactory/`` from ``dpo.jsonl``. A run and the shard
    merge both call it."""
    out = Path(outputs.generated_dir)
    own = ("id", "topic", "student")
    rows = read_jsonl(out / "predictions.jsonl")
    summaries = [({k: v for k, v in r.items() if k not in own} or None) for r in rows]
    exported = write_final_exports(read_jsonl(out / "dpo.jsonl"), out, name=cfg.outputs.llamafactory_name)
    return {
        "language": cfg.language,
        "output_mode": cfg.output_mode,
        "books": context["books"],
        "passages": context["passages"],
        "topics_planned": context["topics_planned"],
        "topics_written": context["topics_written"],
        "topics_dropped": context["topics_dropped"],
        "dialogues": context["dialogues"],
        "groups_run": [g.name for g in cfg.active_groups()],
        "experts_per_group": cfg.experts(),
        "selection": cfg.ablation.selection,
        **aggregate(summaries),
        "exports": {**{f: n for f, n in report.written.items()}, **exported},
        "wall_s": round(counters["topics_wall_s"] + counters["dialogues_wall_s"], 2),
    }


def generate_ram2c(cfg: Ram2cConfig, build_cfg: BuildKBConfig, retrieval_cfg: RetrievalConfig, **kwargs) -> dict:
    """Run the stage (see the module docstring); returns the metrics."""
    return asyncio.run(generate_ram2c_async(cfg, build_cfg, retrieval_cfg, **kwargs))


def no_topics_message(report: SystemReport, reports_dir: Path) -> str:
    """Why no topic is left to write dialogues on: the topic writer's replies, counted."""
    counts = report.unparseable().values()
    replies, bad = sum(c["replies"] for c in counts), sum(c["unparseable"] for c in counts)
    cause = (
        f"every topic reply was unparseable: {bad} of {replies} replies of the topic writer did not parse "
        "(a server that ignores response_format, or a model too small for the prompt; docs/troubleshooting.md)"
        if report.failed_samples < report.samples
        else f"every topic failed: {report.failed_samples} of {report.samples} topic samples"
    )
    return f"ram2c topics: no topic written, so no dialogue to run; {cause}; see {reports_dir / 'failures.json'}"
