"""DVC stage ``report`` (the last one): the summary of every stage that ran.

Reads the ``report`` section of params.yaml (see :class:`pipelines.evaluation.report.config.ReportConfig`)
and, where they exist, ``reports/generate_{tagging,kgc,ram2c}/metrics.json`` (+ ``rounds.csv``),
``reports/train/<run>/{metrics.json,loss.csv}``, ``reports/evaluate/metrics.json``,
``reports/ablations.json`` (the queued ablation set's tables) and the teams'
``data/generated/<team>/{traces,predictions}.jsonl``; writes
(:func:`pipelines.evaluation.report.build.build_report`):

- ``reports/summary.md`` and the self-contained ``reports/summary.html`` (how it was made, the
  shortfalls every stage recorded, tables in the papers' layouts, the ablation tables)
- ``reports/plots/*.png`` and ``reports/plots/*.csv`` (the ``dvc plots`` data)
- ``reports/traces.html`` (the trace browser, a seeded sample per team)
- ``reports/report/metrics.json`` (which inputs were found, sections, plots, offline_default)

A missing input leaves its section out with a note; it is never an error.

    python -m stages.report [--params params.yaml] [--section report] [--debug]

Exit codes: 0 done; 2 bad params.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipelines.config import read_yaml
from pipelines.evaluation.report.build import build_report
from pipelines.evaluation.report.config import ReportConfig
from pipelines.stage import run_stage, stage_setup_sections, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger("edumas")


def _run(argv: list[str] | None) -> int:
    args, cfgs = stage_setup_sections("report", {"report": ReportConfig}, argv)
    cfg: ReportConfig = cfgs["report"]
    params = read_yaml(Path(args.params))
    with stage_run("report", cfg.model_dump()) as run:
        metrics = build_report(cfg, params)
        write_metrics(Path(cfg.outputs.metrics), metrics, run)
    missing = [name for name, found in metrics["inputs"].items() if not found]
    if missing:
        log.warning("report: inputs missing (sections left out): %s", ", ".join(missing))
    log.info("report: %s written (%s)", cfg.outputs.reports_dir, "; ".join(metrics["sections"]) or "no sections")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit code 0 or 2 (bad params: one ``error: ...`` line; ``--debug`` adds the traceback)."""
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
