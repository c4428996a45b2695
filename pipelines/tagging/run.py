"""Stage ``generate_tagging`` as one function: read pairs, hold out demonstrations, run the
chosen systems (team, single LLM, embedding similarity, PLM fine-tuning) on the same evaluated
pairs through the generation harness, and write predictions, traces, SFT rows, the usage, the
Table-4-style table and a plot.

Outputs (``outputs.generated_dir`` / ``outputs.reports_dir``): ``predictions.jsonl`` (one row per
pair, every system's verdict), ``traces.jsonl`` (every agent call: prompt, reply, parsed, sandbox
result, usage; streamed), ``sft.jsonl``; ``usage.json`` (per system and role), ``failures.json``,
``table.md``, ``metrics.png``. The stage writes ``metrics.json`` (the returned metrics).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.agents.harness import GenerationOutputs, HarnessReport, System, preflight, run_systems
from pipelines.llm.client import LLMRuntime
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.baselines import embedding as embedding_baseline
from pipelines.tagging.baselines import plm as plm_baseline
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.data import TaggingExample, limit_examples, read_examples, split_demonstrations
from pipelines.tagging.metrics import binary_metrics, metrics_by_group
from pipelines.tagging.report import write_plot, write_table
from pipelines.tagging.sft import sft_row_for
from pipelines.tagging.team import TaggingTeam, TeamVerdict

log = logging.getLogger(__name__)
LLM_SYSTEMS = ("team", "single_llm")


def _demo_vars(demos: list[TaggingExample]) -> list[dict[str, Any]]:
    return [{"question": d.question, "label": d.label, "rationale": d.rationale} for d in demos]


def team_system(runtime: LLMRuntime, cfg: TaggingConfig, shown) -> System:
    """The multi-agent team; its aggregate verdict is traced as a non-LLM step."""
    team = TaggingTeam(runtime.for_role, cfg.team, shown, mode=cfg.output_mode)

    async def worker(example: TaggingExample, trace: SampleTrace) -> TeamVerdict:
        verdict = await team.tag(example, trace)
        trace.add_result("team", "aggregate", result=verdict, ok=verdict.failures == 0, label=example.label)
        return verdict

    return System(
        "team",
        worker,
        prediction=lambda v: int(v.verdict) if v is not None else 0,
        failed_subtasks=lambda v: v.failures if v is not None else 1,
    )


def single_llm_system(runtime: LLMRuntime, cfg: TaggingConfig, shown) -> System:
    """The few-shot single-LLM baseline (None for a reply that never parsed)."""
    agent = make_single_llm(max_attempts=cfg.team.max_attempts, retry_temperature=cfg.team.retry_temperature)
    llm = runtime.for_role(agent.role)

    async def worker(example: TaggingExample, trace: SampleTrace) -> bool | None:
        demos = _demo_vars(shown.get(example.concept, []))
        vars = {
            "definition": example.definition,
            "question": example.question,
            "demonstrations": demos,
            "language": example.language,
        }
        record = await agent.run(llm, vars, tag="tag", mode=cfg.output_mode)
        trace.add(record)
        return record.parsed.verdict if record.ok else None

    return System(
        "single_llm",
        worker,
        prediction=lambda v: int(v) if v is not None else 0,
        failed_subtasks=lambda v: int(v is None),
    )


def _system_metrics(evaluation, preds, *, usage: dict[str, Any] | None = None, failed: int = 0, report=None):
    labels = [e.label for e in evaluation]
    n = max(1, len(evaluation))
    total = (usage or {}).get("total", {})
    metrics = {
        "overall": binary_metrics(labels, preds),
        "per_knowledge": metrics_by_group([e.knowledge_id for e in evaluation], labels, preds),
        "llm_calls_per_question": total.get("calls", 0) / n,
        "tokens_per_question": (total.get("prompt_tokens", 0) + total.get("completion_tokens", 0)) / n,
        "failed_subtasks": failed,
    }
    if report is not None:
        metrics["failed_samples"] = report.failed_samples
        metrics["unparseable"] = report.unparseable()
    return metrics


def baseline_predictions(cfg: TaggingConfig, root: Path, embed, evaluation, pool_rows) -> dict[str, list[int]]:
    """Predictions of the non-LLM systems (embedding similarity, PLM fine-tuning), in ``cfg.systems`` order."""
    out: dict[str, list[int]] = {}
    for system in cfg.systems:
        if system == "embedding":
            preds, _, threshold = embedding_baseline.predict(cfg.embedding, embed, evaluation, pool_rows)
            log.info("embedding baseline: threshold %s", threshold)
            out[system] = preds
        elif system == "plm":
            plm_cfg = cfg.plm.model_copy(update={"model": str(root / cfg.plm.model)})
            out[system], _ = plm_baseline.train_and_predict(plm_cfg, pool_rows, evaluation)
    return out


async def generate_tagging_async(cfg: TaggingConfig, root: Path | str = ".", runtime: LLMRuntime | None = None):
    """Run the stage; a runtime passed in is used and left open, one made here is closed."""
    root = Path(root)
    own_runtime = runtime is None
    runtime = runtime or LLMRuntime(cfg.llm)
    try:
        return await _generate(cfg, root, runtime)
    finally:
        if own_runtime:
            await runtime.close()


async def _generate(cfg: TaggingConfig, root: Path, runtime: LLMRuntime) -> dict[str, Any]:
    llm_systems = [s for s in cfg.systems if s in LLM_SYSTEMS]
    if llm_systems:
        await preflight(runtime)
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
    outputs = GenerationOutputs(
        generated_dir=str(root / cfg.outputs.generated_dir), reports_dir=str(root / cfg.outputs.reports_dir)
    )
    fixed = baseline_predictions(cfg, root, embed, evaluation, pool_rows) if evaluation else {}
    makers = {"team": team_system, "single_llm": single_llm_system}
    systems = [makers[name](runtime, cfg, shown) for name in llm_systems]
    teacher = runtime.spec_for("semantic_judge").model if "team" in llm_systems else ""

    def prediction_row(e: TaggingExample, preds: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": e.id,
            "knowledge_id": e.knowledge_id,
            "language": e.language,
            "label": e.label,
            "predictions": preds,
        }

    def sft(e: TaggingExample, results: dict[str, Any]) -> list[dict[str, Any]]:
        row = sft_row_for(e, results.get("team"), require_no_failures=cfg.sft.require_no_failures, model=teacher)
        return [row] if row is not None else []

    report = await run_systems(
        evaluation,
        systems,
        accounting=runtime.accounting,
        outputs=outputs,
        sample_id=lambda e: e.id,
        prediction_row=prediction_row,
        exports={"sft.jsonl": sft},
        fixed_predictions=fixed,
        order=cfg.systems,
        concurrency=cfg.concurrency,
        max_failed_share=cfg.max_failed_share,
        progress=cfg.progress,
        desc="tagging",
    )
    return _write_reports(cfg, Path(outputs.reports_dir), examples, pool_rows, evaluation, fixed, report)


def _write_reports(cfg, reports_dir: Path, examples, pool_rows, evaluation, fixed, report: HarnessReport):
    metrics_by_system = {}
    for name in cfg.systems:
        if name in report.systems:
            system = report.systems[name]
            metrics_by_system[name] = _system_metrics(
                evaluation, system.predictions, usage=system.usage, failed=system.failed_subtasks, report=system
            )
        else:
            metrics_by_system[name] = _system_metrics(evaluation, fixed[name])
    metrics = {
        "n_pairs": len(examples),
        "n_demonstration_pool": len(pool_rows),
        "n_evaluated": len(evaluation),
        "sft_rows": report.written.get("sft.jsonl", 0),
        "output_mode": cfg.output_mode,
        "failed_samples": report.failed_samples,
        "systems": metrics_by_system,
    }
    note = (
        f"{len(evaluation)} evaluated pairs from `{cfg.data.path}` ({len(pool_rows)} held out as "
        f"demonstrations). Scores in %. Default offline models are tiny; see README for real runs."
    )
    write_table(reports_dir / "table.md", metrics_by_system, title="Knowledge tagging (Table 4 layout)", note=note)
    write_plot(reports_dir / "metrics.png", metrics_by_system)
    return metrics


def generate_tagging(cfg: TaggingConfig, root: Path | str = ".", runtime: LLMRuntime | None = None) -> dict[str, Any]:
    """Run the stage; returns the metrics (the stage writes them to ``<reports_dir>/metrics.json``)."""
    return asyncio.run(generate_tagging_async(cfg, root, runtime))
