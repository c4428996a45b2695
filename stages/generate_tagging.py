"""DVC stage ``generate_tagging``: the multi-agent knowledge-tagging team and its baselines.

Reads the ``tagging`` section of params.yaml (see :class:`pipelines.tagging.config.TaggingConfig`),
runs :func:`pipelines.tagging.run.generate_tagging` and writes, under ``tagging.outputs``
(defaults in the config, the files listed in dvc.yaml):

- ``data/generated/tagging/{predictions,traces,sft}.jsonl``
- ``reports/generate_tagging/{metrics.json,usage.json,failures.json,table.md,metrics.png}``

    python -m stages.generate_tagging [--params params.yaml] [--section tagging] [--debug]

Exit codes: 0 done; 1 a missing input, an LLM failure (server down, missing API key, corrupt
cache), an empty evaluation set or more failed samples than ``max_failed_share``; 2 bad params.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipelines.stage import run_stage, stage_setup_sections, write_metrics
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from pipelines.tracking import stage_run

log = logging.getLogger("edumas.stages.generate_tagging")


def summary_line(metrics: dict) -> str:
    parts = [
        f"{name}: acc {m['overall']['accuracy']:.3f} F1 {m['overall']['f1']:.3f}"
        for name, m in metrics["systems"].items()
    ]
    return (
        f"{metrics['n_evaluated']} pairs evaluated ({metrics['output_mode']} mode); "
        + "; ".join(parts)
        + f"; {metrics['sft_rows']} SFT rows"
    )


def _run(argv: list[str] | None) -> int:
    _, cfgs = stage_setup_sections("generate_tagging", {"tagging": TaggingConfig}, argv)
    cfg = cfgs["tagging"]
    with stage_run("generate_tagging", cfg.model_dump()) as run:
        metrics = generate_tagging(cfg)
        write_metrics(Path(cfg.outputs.reports_dir) / "metrics.json", metrics, run)
    log.info("%s", summary_line(metrics))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
