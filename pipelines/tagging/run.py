"""Stage ``generate_tagging`` as one function: read pairs, split them into a generation split and
a held-out evaluation split, run the chosen systems (team, single LLM, embedding similarity, PLM
fine-tuning) on the evaluation split through the generation harness, run the team on the
generation split too (its right verdicts become SFT rows), and write predictions, traces, SFT
rows, the split, the usage, the Table-4-style table and a plot.

Demonstrations, the planner's examples, the embedding threshold and the PLM come from the
generation split only. A failed sample (crashed, unparsed, or a team verdict that hangs on a
failed sub-task) is predicted ``null`` and scored by ``failure_outcome`` beside a coverage column.

Outputs (``outputs.generated_dir`` / ``outputs.reports_dir``): ``predictions.jsonl`` (one row per
pair run, with its ``split``; evaluation rows carry every system's verdict, generation rows the
team's), ``traces.jsonl`` (every agent call; streamed), ``sft.jsonl`` (generation split only,
``meta.split``), ``split.json`` (how the rows were split and both splits' ids, for the data
card); ``usage.json``, ``failures.json``, ``table.md``, ``metrics.png``. The stage writes
``metrics.json`` (the returned metrics).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.agents.generation import run_runtime
from pipelines.agents.harness import GenerationOutputs, HarnessReport, System, run_systems
from pipelines.agents.shards import params_fingerprint, roundtrip, write_manifest
from pipelines.io import read_jsonl, write_json_atomic
from pipelines.llm.client import LLMRuntime
from pipelines.tagging.agents.planner import PlannerExamples
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.baselines import embedding as embedding_baseline
from pipelines.tagging.baselines import plm as plm_baseline
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.data import TaggingExample, limit_examples, read_examples
from pipelines.tagging.metrics import scored_metrics, scored_metrics_by_group
from pipelines.tagging.report import backbones, write_plot, write_table
from pipelines.tagging.sft import sft_row_for
from pipelines.tagging.split import Demonstrations, build_demonstrations, split_examples
from pipelines.tagging.team import TaggingTeam, TeamVerdict, cap_to_schema

log = logging.getLogger(__name__)
LLM_SYSTEMS = ("team", "single_llm")
SKIPPED = object()  # a system that does not run on a generation-split sample


@dataclass
class Sample:
    """One pair the harness runs, with the split it belongs to."""

    example: TaggingExample
    split: str  # "evaluation" | "generation"

    @property
    def id(self) -> str:
        return self.example.id


def demo_vars(demos: list[TaggingExample], definition: str) -> list[dict[str, Any]]:
    """The single LLM's demonstrations (a demonstration of another concept shows its definition)."""
    out = []
    for d in demos:
        row = {"question": d.question, "label": d.label, "rationale": d.rationale}
        if d.definition != definition:
            row["definition"] = d.definition
        out.append(row)
    return out


def team_prediction(verdict: TeamVerdict | None) -> int | None:
    return int(verdict.verdict) if verdict is not None and verdict.answered else None


def team_system(runtime: LLMRuntime, cfg: TaggingConfig, demos: Demonstrations, planner_examples) -> System:
    """The multi-agent team on both splits; its aggregate verdict is traced as a non-LLM step."""
    team = TaggingTeam(runtime.for_role, cfg.team, demos, mode=cfg.output_mode, planner_examples=planner_examples)

    async def worker(sample: Sample, trace: SampleTrace) -> TeamVerdict:
        verdict = await team.tag(sample.example, trace)
        correct = bool(verdict.verdict) == bool(sample.example.label)
        trace.add_result(
            "team",
            "aggregate",
            result=verdict,
            ok=verdict.failures == 0,
            label=sample.example.label,
            split=sample.split,
            answered=verdict.answered,
            outcome=("correct" if correct else "wrong") if verdict.answered else "failed",  # read by the trace browser
        )
        return verdict

    system = System(
        "team",
        worker,
        prediction=team_prediction,
        failed_subtasks=lambda v: v.failures if v is not None else 1,
    )
    system.team = team  # the plan truncation counts are read after the run
    return system


def single_llm_system(runtime: LLMRuntime, cfg: TaggingConfig, demos: Demonstrations, planner_examples) -> System:
    """The few-shot single-LLM baseline on the evaluation split (None for a reply that never parsed)."""
    agent = make_single_llm(max_attempts=cfg.team.max_attempts, retry_temperature=cfg.team.retry_temperature)
    if cfg.output_mode == "json":
        cap_to_schema(agent)
    llm = runtime.for_role(agent.role)

    async def worker(sample: Sample, trace: SampleTrace) -> bool | None:
        if sample.split != "evaluation":
            return SKIPPED
        example = sample.example
        vars = {
            "definition": example.definition,
            "question": example.question,
            "demonstrations": demo_vars(demos.for_example(example), example.definition),
            "language": example.language,
        }
        record = await agent.run(llm, vars, tag="tag", mode=cfg.output_mode)
        trace.add(record)
        return record.parsed.verdict if record.ok else None

    return System(
        "single_llm",
        worker,
        prediction=lambda v: None if v is None or v is SKIPPED else int(v),
        failed_subtasks=lambda v: int(v is None),
    )


def _system_metrics(cfg: TaggingConfig, evaluation, preds, *, questions: int, usage=None, failed=0, report=None):
    """One system's scores on the evaluation rows (``label``, ``knowledge_id``) and its counts."""
    labels = [r["label"] for r in evaluation]
    n = max(1, questions)
    total = (usage or {}).get("total", {})
    metrics = {
        "overall": scored_metrics(labels, preds, failure_outcome=cfg.failure_outcome),
        "per_knowledge": scored_metrics_by_group(
            [r["knowledge_id"] for r in evaluation], labels, preds, failure_outcome=cfg.failure_outcome
        ),
        "questions_run": questions,
        "llm_calls_per_question": total.get("calls", 0) / n,
        "tokens_per_question": (total.get("prompt_tokens", 0) + total.get("completion_tokens", 0)) / n,
        "failed_subtasks": failed,
    }
    if report is not None:
        metrics["failed_samples"] = report.failed_samples
        metrics["unparseable"] = report.unparseable()
    return metrics


def baseline_predictions(cfg: TaggingConfig, root: Path, embed, evaluation, generation):
    """Predictions and details (threshold and its source; chosen learning rate and sweep) of the
    non-LLM systems, trained on the generation split, in ``cfg.systems`` order."""
    out: dict[str, list[int]] = {}
    details: dict[str, dict[str, Any]] = {}
    for system in cfg.systems:
        if system == "embedding":
            preds, _, info = embedding_baseline.predict(cfg.embedding, embed, evaluation, generation)
            log.info("embedding baseline: threshold %s (%s)", info["threshold"], info["source"])
            out[system], details[system] = preds, {"threshold": info["threshold"], "threshold_source": info["source"]}
        elif system == "plm":
            plm_cfg = cfg.plm.model_copy(update={"model": str(root / cfg.plm.model)})
            out[system], _, details[system] = plm_baseline.train_and_predict(plm_cfg, generation, evaluation)
    return out, details


async def generate_tagging_async(cfg: TaggingConfig, root: Path | str = ".", runtime: LLMRuntime | None = None):
    """Run the stage; a runtime passed in is used and left open, one made here is closed."""
    async with run_runtime(cfg.llm, runtime) as runtime:
        return await _generate(cfg, Path(root), runtime)


def _embedders(cfg: TaggingConfig, root: Path):
    """(baseline embedder, demonstration embedder): each loaded only when needed, once per folder."""
    loaded: dict[str, Any] = {}

    def load(model: str):
        if model not in loaded:
            loaded[model] = embedding_baseline.load_embedder(root / model, cfg.embedding.batch_size)
        return loaded[model]

    baseline = load(cfg.embedding.model) if "embedding" in cfg.systems else None
    demos = load(cfg.demos.embedding_model) if cfg.demos.strategy == "nearest" else None
    return baseline, demos


async def _generate(cfg: TaggingConfig, root: Path, runtime: LLMRuntime) -> dict[str, Any]:
    llm_systems = [s for s in cfg.systems if s in LLM_SYSTEMS]
    if llm_systems:
        await runtime.preflight()
    examples = read_examples(cfg.data, root)
    split = split_examples(examples, cfg.split)
    evaluation = limit_examples(split.evaluation, cfg.data.limit, cfg.data.seed)
    generation_run = (
        limit_examples(split.generation, cfg.split.generation_limit, cfg.split.seed) if "team" in llm_systems else []
    )
    embed, demo_embed = _embedders(cfg, root)
    demos = build_demonstrations(split.generation, cfg.demos, root=root, embed=demo_embed)
    planner_examples = PlannerExamples(k=2, strategy=cfg.demos.strategy, seed=cfg.demos.seed, embed=demo_embed)
    log.info(
        "tagging: %d pairs read; split by %s: %d generation (%d run by the team for SFT), %d evaluation (%d evaluated)",
        len(examples),
        cfg.split.by,
        len(split.generation),
        len(generation_run),
        len(split.evaluation),
        len(evaluation),
    )
    outputs = cfg.shard.outputs(cfg.outputs, root)
    write_json_atomic(Path(outputs.generated_dir) / "split.json", split.record())
    fixed, details = baseline_predictions(cfg, root, embed, evaluation, split.generation)
    samples = [Sample(e, "evaluation") for e in evaluation] + [Sample(e, "generation") for e in generation_run]
    padded = {name: list(values) + [None] * len(generation_run) for name, values in fixed.items()}
    makers = {"team": team_system, "single_llm": single_llm_system}
    systems = [makers[name](runtime, cfg, demos, planner_examples) for name in llm_systems]
    teacher = runtime.spec_for("semantic_judge").model if "team" in llm_systems else ""

    def prediction_row(sample: Sample, preds: dict[str, Any]) -> dict[str, Any]:
        e = sample.example
        if sample.split != "evaluation":
            preds = {name: value for name, value in preds.items() if name == "team"}
        return {
            "id": e.id,
            "knowledge_id": e.knowledge_id,
            "language": e.language,
            "label": e.label,
            "split": sample.split,
            "predictions": preds,
        }

    def sft(sample: Sample, results: dict[str, Any]) -> list[dict[str, Any]]:
        if sample.split != "generation":
            return []
        row = sft_row_for(
            sample.example,
            results.get("team"),
            require_no_failures=cfg.sft.require_no_failures,
            model=teacher,
            split=sample.split,
            split_by=cfg.split.by,
        )
        return [row] if row is not None else []

    report = await run_systems(
        samples,
        systems,
        accounting=runtime.accounting,
        outputs=outputs,
        sample_id=lambda s: s.id,
        prediction_row=prediction_row,
        exports={"sft.jsonl": sft},
        fixed_predictions=padded,
        order=cfg.systems,
        concurrency=cfg.concurrency,
        max_failed_share=cfg.max_failed_share,
        progress=cfg.progress,
        desc="tagging",
        shard=cfg.shard,
        shard_group=lambda s: (s.example.definition, s.example.language),  # the team plans once per concept
    )
    team = next((s.team for s in systems if s.name == "team"), None)
    record = split.record()
    context = {
        "n_pairs": len(examples),
        "split": {k: v for k, v in record.items() if k != "ids"},
        "n_demonstration_pool": len(split.generation),
        "details": details,
        "backbones": backbones(cfg, runtime),
    }
    counters = {"plan_truncation": team.truncation()} if team is not None else {}
    metrics = finish_tagging(cfg, outputs, report, context=roundtrip(context), counters=roundtrip(counters))
    write_manifest(
        cfg.shard,
        outputs,
        report,
        fingerprint=params_fingerprint(cfg),
        context=context,
        counters=counters,
        shared=["=generated:split.json"],
    )
    return metrics


def finish_tagging(
    cfg: TaggingConfig, outputs: GenerationOutputs, report: HarnessReport, *, context: dict, counters: dict
) -> dict[str, Any]:
    """Metrics from ``<generated_dir>/predictions.jsonl`` (its evaluation rows), the harness counts,
    ``context`` (pairs, split, pool, baseline details, backbones) and ``counters`` (the team's plan
    truncation); writes ``table.md`` and ``metrics.png``. A run and the shard merge both call it."""
    rows = read_jsonl(Path(outputs.generated_dir) / "predictions.jsonl")
    evaluation = [r for r in rows if r["split"] == "evaluation"]
    n_eval, n_gen = len(evaluation), len(rows) - len(evaluation)
    metrics_by_system = {}
    for name in cfg.systems:
        preds = [r["predictions"].get(name) for r in evaluation]
        if name in report.systems:
            system = report.systems[name]
            metrics_by_system[name] = _system_metrics(
                cfg,
                evaluation,
                preds,
                questions=n_eval + (n_gen if name == "team" else 0),
                usage=system.usage,
                failed=system.failed_subtasks,
                report=system,
            )
        else:
            metrics_by_system[name] = _system_metrics(cfg, evaluation, preds, questions=n_eval)
        metrics_by_system[name].update(context["details"].get(name, {}))
        if name == "team" and counters:
            metrics_by_system[name]["plan_truncation"] = counters["plan_truncation"]
        metrics_by_system[name]["backbone"] = context["backbones"].get(name, "")
    metrics = {
        "n_pairs": context["n_pairs"],
        "split": context["split"],
        "n_demonstration_pool": context["n_demonstration_pool"],
        "n_evaluated": n_eval,
        "n_generation_run": n_gen,
        "sft_rows": report.written.get("sft.jsonl", 0),
        "output_mode": cfg.output_mode,
        "failure_outcome": cfg.failure_outcome,
        "failed_samples": report.failed_samples,
        "systems": metrics_by_system,
    }
    note = (
        f"{n_eval} evaluated pairs (evaluation split) from `{cfg.data.path}`; the split by {cfg.split.by} "
        f"keeps {context['n_demonstration_pool']} generation pairs (demonstrations, baseline training, and "
        f"{n_gen} run by the team for SFT rows). Scores in %; failed samples count as "
        f"{ {'wrong': 'wrong', 'no': 'No', 'omit': 'left out'}[cfg.failure_outcome] }; coverage = answered / evaluated."
    )
    reports_dir = Path(outputs.reports_dir)
    write_table(reports_dir / "table.md", metrics_by_system, title="Knowledge tagging (Table 4 layout)", note=note)
    write_plot(reports_dir / "metrics.png", metrics_by_system)
    return metrics


def generate_tagging(cfg: TaggingConfig, root: Path | str = ".", runtime: LLMRuntime | None = None) -> dict[str, Any]:
    """Run the stage; returns the metrics (the stage writes them to ``<reports_dir>/metrics.json``)."""
    return asyncio.run(generate_tagging_async(cfg, root, runtime))
