"""The stage's metrics from its streamed predictions, and its human-facing outputs.

:func:`finish_tagging` reads ``<generated_dir>/predictions.jsonl`` (its evaluation rows), adds the
harness counts, the run's context (pairs, split, pool, baseline details, backbones) and counters
(per team system: plan truncation and how its numerical sub-constraints were judged), and writes
``table.md`` (Table 4 layout, :func:`pipelines.reporting.tables.tagging_table`, the same
table the summary report shows) and ``metrics.png``. A run and the shard merge both call it; a shard
(``cfg.shard`` active) writes no ``metrics.png``, which the merge draws (a shard process then never
imports matplotlib: about 1 s of CPU with the drawing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents.harness import GenerationOutputs, HarnessReport
from pipelines.io import read_jsonl
from pipelines.reporting.plots import figure_unless_shard
from pipelines.tagging.backbones import sizes, split_system, system_names
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.metrics import scored_metrics, scored_metrics_by_group
from pipelines.tagging.report import write_plot, write_table


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


def finish_tagging(
    cfg: TaggingConfig, outputs: GenerationOutputs, report: HarnessReport, *, context: dict, counters: dict
) -> dict[str, Any]:
    """The stage's metrics (see the module docstring); writes ``table.md`` and ``metrics.png``."""
    rows = read_jsonl(Path(outputs.generated_dir) / "predictions.jsonl")
    evaluation = [r for r in rows if r["split"] == "evaluation"]
    n_eval, n_gen = len(evaluation), len(rows) - len(evaluation)
    size_of = {s.suffix: s.name for s in sizes(cfg)}
    metrics_by_system = {}
    for name in system_names(cfg):
        method, suffix = split_system(name)
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
        metrics_by_system[name].update(counters.get(name, {}))
        metrics_by_system[name].update(method=method, size=size_of[suffix], backbone=context["backbones"].get(name, ""))
    metrics = {
        "n_pairs": context["n_pairs"],
        "split": context["split"],
        "n_demonstration_pool": context["n_demonstration_pool"],
        "n_evaluated": n_eval,
        "n_generation_run": n_gen,
        "sft_rows": report.written.get("sft.jsonl", 0),
        "output_mode": cfg.output_mode,
        "program": cfg.team.program,
        "failure_outcome": cfg.failure_outcome,
        "data": cfg.data.path,
        "failed_samples": report.failed_samples,
        "systems": metrics_by_system,
    }
    reports_dir = Path(outputs.reports_dir)
    write_table(reports_dir / "table.md", metrics)
    draw = lambda path: write_plot(path, metrics_by_system)  # noqa: E731
    figure_unless_shard(reports_dir / "metrics.png", draw, shard=cfg.shard.active)
    return metrics
