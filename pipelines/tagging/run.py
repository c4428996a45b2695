"""Stage ``generate@tagging`` as one function: read pairs, hold out demonstrations, run the
chosen systems (team, single LLM, embedding similarity, PLM fine-tuning) on the same evaluated
pairs, and write predictions, traces, SFT rows, metrics, the Table-4-style table and a plot.

Outputs (``outputs.generated_dir`` / ``outputs.reports_dir``):
``predictions.jsonl`` (one row per pair, every system's verdict), ``traces.jsonl`` (every agent
call: prompt, reply, parsed, sandbox result, usage), ``sft.jsonl``; ``metrics.json``,
``usage.json`` (per role), ``table.md``, ``metrics.png``.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from pipelines.agents import Runner, SampleTrace, to_jsonable
from pipelines.io import write_json_atomic, write_jsonl_atomic
from pipelines.llm.client import LLMRuntime
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.baselines import embedding as embedding_baseline
from pipelines.tagging.baselines import plm as plm_baseline
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.data import TaggingExample, limit_examples, read_examples, split_demonstrations
from pipelines.tagging.metrics import binary_metrics, metrics_by_group
from pipelines.tagging.report import write_plot, write_table
from pipelines.tagging.sft import sft_rows
from pipelines.tagging.team import TaggingTeam

log = logging.getLogger(__name__)

ROLES = {"team": ("planner", "solver", "semantic_judge", "numerical_judge"), "single_llm": ("single_llm",)}


def _demo_vars(demos: list[TaggingExample]) -> list[dict[str, Any]]:
    return [{"question": d.question, "label": d.label, "rationale": d.rationale} for d in demos]


async def run_team(runtime: LLMRuntime, cfg: TaggingConfig, shown, evaluation):
    """Team verdicts (None for a sample that crashed) and the run report with its traces."""
    team = TaggingTeam(runtime.for_role, cfg.team, shown)

    async def worker(example: TaggingExample, trace: SampleTrace):
        verdict = await team.tag(example, trace)
        trace.add_row(
            {
                "agent": "team",
                "role": "aggregate",
                "prompt": None,
                "reply": None,
                "parsed": to_jsonable(verdict),
                "ok": verdict.failures == 0,
                "error": None,
                "usage": {},
                "cached": False,
                "label": example.label,
            }
        )
        return verdict

    report = await Runner(cfg.concurrency, desc="tagging team", progress=cfg.progress).run(
        evaluation, worker, sample_id=lambda e: e.id
    )
    return report.results, report


async def run_single_llm(runtime: LLMRuntime, cfg: TaggingConfig, shown, evaluation):
    agent = make_single_llm(max_attempts=cfg.team.max_attempts, retry_temperature=cfg.team.retry_temperature)
    llm = runtime.for_role(agent.role)

    async def worker(example: TaggingExample, trace: SampleTrace):
        demos = _demo_vars(shown.get(example.concept, []))
        record = await agent.run(
            llm,
            {
                "definition": example.definition,
                "question": example.question,
                "demonstrations": demos,
                "language": example.language,
            },
        )
        trace.add(record)
        return record.parsed.verdict if record.ok else None

    report = await Runner(cfg.concurrency, desc="single LLM", progress=cfg.progress).run(
        evaluation, worker, sample_id=lambda e: e.id
    )
    return report.results, report


def _system_metrics(evaluation, preds: list[int], usage: dict[str, Any], roles=(), failed=0) -> dict[str, Any]:
    labels = [e.label for e in evaluation]
    n = max(1, len(evaluation))
    calls = sum(usage.get(r, {}).get("calls", 0) for r in roles)
    tokens = sum(usage.get(r, {}).get("prompt_tokens", 0) + usage.get(r, {}).get("completion_tokens", 0) for r in roles)
    return {
        "overall": binary_metrics(labels, preds),
        "per_knowledge": metrics_by_group([e.knowledge_id for e in evaluation], labels, preds),
        "llm_calls_per_question": calls / n,
        "tokens_per_question": tokens / n,
        "failed_subtasks": failed,
    }


async def generate_tagging_async(cfg: TaggingConfig, root: Path | str = ".", runtime: LLMRuntime | None = None):
    root = Path(root)
    examples = read_examples(cfg.data, root)
    needs_embedder = "embedding" in cfg.systems or cfg.demos.strategy == "nearest"
    embed = (
        embedding_baseline.load_embedder(root / cfg.embedding.model, cfg.embedding.batch_size)
        if needs_embedder
        else None
    )
    shown, evaluation, pools = split_demonstrations(examples, cfg.demos, embed)
    evaluation = limit_examples(evaluation, cfg.data.limit, cfg.data.seed)
    pool_rows = [e for pool in pools.values() for e in pool]
    log.info(
        "tagging: %d pairs read, %d held out as demonstrations, %d evaluated",
        len(examples),
        len(pool_rows),
        len(evaluation),
    )
    gen, rep = root / cfg.outputs.generated_dir, root / cfg.outputs.reports_dir
    runtime = runtime or LLMRuntime(cfg.llm)
    predictions: dict[str, list[int]] = {}
    systems: dict[str, dict[str, Any]] = {}
    traces: list[dict[str, Any]] = []
    team_results = None
    try:
        for system in cfg.systems:
            if system in ROLES:
                runner = run_team if system == "team" else run_single_llm
                results, report = await runner(runtime, cfg, shown, evaluation)
                for row in report.trace_rows():
                    row["system"] = system
                    traces.append(row)
                if system == "team":
                    team_results = results
                    failed = sum(r.failures for r in results if r is not None) + report.failures
                    preds = [int(r.verdict) if r is not None else 0 for r in results]
                else:
                    failed = sum(r is None for r in results)
                    preds = [int(r) if r is not None else 0 for r in results]
                predictions[system] = preds
                systems[system] = (system, preds, ROLES[system], failed)
            elif system == "embedding":
                preds, scores, threshold = embedding_baseline.predict(cfg.embedding, embed, evaluation, pool_rows)
                predictions[system] = preds
                systems[system] = (system, preds, (), 0)
                log.info("embedding baseline: threshold %s", threshold)
            elif system == "plm":
                preds, _ = plm_baseline.train_and_predict(
                    cfg.plm.model_copy(update={"model": str(root / cfg.plm.model)}), pool_rows, evaluation
                )
                predictions[system] = preds
                systems[system] = (system, preds, (), 0)
        usage = runtime.accounting.summary()
    finally:
        if runtime is not None:
            await runtime.close()
    metrics_by_system = {
        name: _system_metrics(evaluation, preds, usage, roles, failed)
        for name, (_, preds, roles, failed) in systems.items()
    }
    rows = [
        {
            "id": e.id,
            "knowledge_id": e.knowledge_id,
            "language": e.language,
            "label": e.label,
            "predictions": {s: p[i] for s, p in predictions.items()},
        }
        for i, e in enumerate(evaluation)
    ]
    write_jsonl_atomic(gen / "predictions.jsonl", rows)
    write_jsonl_atomic(gen / "traces.jsonl", traces)
    identity = runtime.spec_for("semantic_judge").model if team_results is not None else ""
    sft = (
        sft_rows(evaluation, team_results, require_no_failures=cfg.sft.require_no_failures, model=identity)
        if team_results is not None
        else []
    )
    write_jsonl_atomic(gen / "sft.jsonl", sft)
    metrics = {
        "n_pairs": len(examples),
        "n_demonstration_pool": len(pool_rows),
        "n_evaluated": len(evaluation),
        "sft_rows": len(sft),
        "systems": metrics_by_system,
    }
    write_json_atomic(rep / "usage.json", usage)
    note = (
        f"{len(evaluation)} evaluated pairs from `{cfg.data.path}` ({len(pool_rows)} held out as "
        f"demonstrations). Scores in %. Default offline models are tiny; see README for real runs."
    )
    write_table(rep / "table.md", metrics_by_system, title="Knowledge tagging (Table 4 layout)", note=note)
    write_plot(rep / "metrics.png", metrics_by_system)
    return metrics


def generate_tagging(cfg: TaggingConfig, root: Path | str = ".", runtime: LLMRuntime | None = None) -> dict[str, Any]:
    """Run the stage; returns the metrics (also written to ``reports_dir``, except metrics.json,
    which the stage writes with :func:`pipelines.stage.write_metrics`)."""
    return asyncio.run(generate_tagging_async(cfg, root, runtime))
