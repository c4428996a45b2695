"""Stage ``generate_ram2c`` as one function: passages -> topics -> dialogues through the T/P/E
groups -> quality gates -> exports, traces and metrics.

Outputs under ``outputs.generated_dir``: ``dpo.jsonl``, ``sft.jsonl``, ``preference/`` (datasets),
``llamafactory/``, ``dialogues.jsonl`` (each dialogue end to end: topic, student, every turn's
answer, rejected and chosen reply, per-group summary), ``traces.jsonl`` (every call, retrieval,
vote tally, analysis, revision and synthesis with ``turn``/``group``/``expert``), ``dropped.jsonl``
(gated pairs and dropped topics with their reason); ``outputs.reports_dir/usage.json``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

import numpy as np

from pipelines.agents import Runner, SampleTrace, to_jsonable
from pipelines.io import write_json_atomic, write_jsonl_atomic
from pipelines.llm.client import LLMRuntime
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.exports import write_exports
from pipelines.ram2c.gates import apply_gates
from pipelines.ram2c.scenario import theme_names
from pipelines.ram2c.sources import load_passages
from pipelines.ram2c.students import make_personas
from pipelines.ram2c.team import Dialogue, DialoguePlan, Ram2cTeam
from pipelines.ram2c.topics import select_topics, topic_plans
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig

log = logging.getLogger(__name__)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def pairs_of(dialogues: list[Dialogue | None], language: str) -> list[dict]:
    """One (prompt, chosen, rejected) pair per finished turn."""
    pairs = []
    for d in dialogues:
        if d is None:
            continue
        for t in d.turns:
            meta = {"dialogue": d.id, "turn": t.turn, "topic": d.topic, "student": d.persona["id"]}
            pairs.append(
                {
                    "id": f"{d.id}-t{t.turn}",
                    "language": language,
                    "prompt": t.prompt,
                    "chosen": t.chosen,
                    "rejected": t.rejected,
                    "meta": meta,
                }
            )
    return pairs


def dialogue_metrics(dialogues: list[Dialogue | None], traces: list[dict]) -> dict[str, Any]:
    """Retrieval and votes per group, calls and tokens per dialogue and per group."""
    per_group: dict[str, Counter] = defaultdict(Counter)
    for d in dialogues:
        for t in d.turns if d else []:
            for g in t.groups:
                c = per_group[g.group]
                c["turns"] += 1
                c["retrieved"] += g.retrieved
                c["accepted"] += g.accepted
                c["votes"] += sum(len(v["votes"]) for v in g.votes)
                c["yes_votes"] += sum(x is True for v in g.votes for x in v["votes"].values())
                c["llm_calls"] += g.calls
                c["tokens"] += g.tokens
                c["failures"] += g.failures
                c["synthesized"] += g.synthesized
    calls = sum(r.get("calls", 0) for r in traces)
    tokens = sum(sum(r.get("usage", {}).values()) for r in traces)
    n = max(1, sum(d is not None for d in dialogues))
    groups = {}
    for name, c in per_group.items():
        turns = max(1, c["turns"])
        groups[name] = {
            **dict(c),
            "retrieved_per_turn": round(c["retrieved"] / turns, 3),
            "accepted_per_turn": round(c["accepted"] / turns, 3),
            "accepted_share": round(c["accepted"] / max(1, c["retrieved"]), 4),
            "llm_calls_per_turn": round(c["llm_calls"] / turns, 3),
            "tokens_per_turn": round(c["tokens"] / turns, 1),
        }
    return {
        "llm_calls": calls,
        "tokens": tokens,
        "llm_calls_per_dialogue": round(calls / n, 3),
        "tokens_per_dialogue": round(tokens / n, 1),
        "groups": groups,
    }


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
    root = Path(root)
    unknown = [g.retrieval_group for g in cfg.active_groups() if g.retrieval_group not in retrieval_cfg.groups]
    if unknown:
        raise ValueError(f"ram2c.groups name retrieval groups {unknown} missing from retrieval.groups; add them")
    passages = [p for s in cfg.sources if s.language == cfg.language for p in load_passages(s, root)]
    runtime = runtime or LLMRuntime(cfg.llm)
    try:
        if retriever is None:
            from pipelines.retrieval.service import open_retriever

            retriever = open_retriever(build_cfg, retrieval_cfg, llm=runtime.for_role("query_rewriter"), root=root)
        if reranker is None and cfg.ablation.selection == "rerank":
            from pipelines.retrieval.rerank import CrossEncoderReranker

            reranker = CrossEncoderReranker(
                retrieval_cfg.rerank.model_copy(update={"model": str(root / retrieval_cfg.rerank.model)})
            )
        team = Ram2cTeam(cfg, runtime.for_role, retriever, reranker=reranker)
        avoid = theme_names(cfg.topics.excluded_themes, cfg.language)
        plans = topic_plans(passages, cfg.topics, math.ceil(cfg.dialogues * cfg.topics.oversample))

        async def topic_worker(plan, trace: SampleTrace):
            return await team.write_topic(plan, trace, avoid=avoid)

        topic_report = await Runner(cfg.concurrency, desc="ram2c topics", progress=cfg.progress).run(
            plans, topic_worker, sample_id=lambda p: f"topic-{p.index}"
        )
        written = [t for t in topic_report.results if t is not None]
        embed = lambda texts: unit_rows(retriever.embedder.encode_queries(texts).dense)  # noqa: E731
        topics, dropped_topics = select_topics(written, embed, cfg.topics, cfg.dialogues, language=cfg.language)
        personas = make_personas(len(topics), cfg.language, seed=cfg.students.seed)
        dialogue_plans = [
            DialoguePlan(f"d{i}", t, p, cfg.language) for i, (t, p) in enumerate(zip(topics, personas, strict=True))
        ]
        report = await Runner(cfg.concurrency, desc="ram2c dialogues", progress=cfg.progress).run(
            dialogue_plans, team.dialogue, sample_id=lambda d: d.id
        )
        usage = runtime.accounting.summary()
    finally:
        await runtime.close()
    out, rep = root / cfg.outputs.generated_dir, root / cfg.outputs.reports_dir
    dialogues = report.results
    traces = topic_report.trace_rows() + report.trace_rows()
    pairs = pairs_of(dialogues, cfg.language)
    kept, dropped, reasons = apply_gates(pairs, cfg.gates)
    exported = write_exports(kept, out, name=cfg.outputs.llamafactory_name)
    write_jsonl_atomic(out / "traces.jsonl", traces)
    write_jsonl_atomic(out / "dialogues.jsonl", [to_jsonable(d) for d in dialogues if d is not None])
    write_jsonl_atomic(
        out / "dropped.jsonl",
        [{"kind": "pair", **d} for d in dropped] + [{"kind": "topic", **d} for d in dropped_topics],
    )
    write_json_atomic(rep / "usage.json", usage)
    finished = [d for d in dialogues if d is not None]
    metrics = {
        "language": cfg.language,
        "books": sorted({p.book for p in passages}),
        "passages": len(passages),
        "topics_written": len(written),
        "topics_failed": len(plans) - len(written),
        "topics_dropped": dict(Counter(d["reason"].split(":")[0] for d in dropped_topics)),
        "dialogues": len(dialogue_plans),
        "dialogues_failed": report.failures,
        "dialogues_stopped": sum(d.stopped is not None for d in finished),
        "turns": sum(len(d.turns) for d in finished),
        "pairs_generated": len(pairs),
        "pairs_kept": len(kept),
        "pairs_dropped": len(dropped),
        "dropped_by_reason": reasons,
        "failed_steps": sum(d.failures for d in finished),
        "groups_run": [g.name for g in cfg.active_groups()],
        "experts_per_group": cfg.experts(),
        "selection": cfg.ablation.selection,
        **dialogue_metrics(dialogues, report.trace_rows()),
        "mean_chars_chosen": round(mean(len(p["chosen"]) for p in kept), 1) if kept else 0.0,
        "mean_chars_rejected": round(mean(len(p["rejected"]) for p in kept), 1) if kept else 0.0,
        "exports": exported,
        "wall_s": round(topic_report.wall_s + report.wall_s, 2),
        "expert_personas": {
            g.name: [e.id for e in grp.experts] for g, grp in zip(cfg.active_groups(), team.groups, strict=True)
        },
    }
    return metrics


def generate_ram2c(cfg: Ram2cConfig, build_cfg: BuildKBConfig, retrieval_cfg: RetrievalConfig, **kwargs) -> dict:
    """Run the stage (see the module docstring); returns the metrics."""
    return asyncio.run(generate_ram2c_async(cfg, build_cfg, retrieval_cfg, **kwargs))
