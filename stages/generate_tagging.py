"""DVC stage ``generate@tagging``: the multi-agent knowledge-tagging team and its baselines.

Reads the ``tagging`` section of params.yaml (see :class:`pipelines.tagging.config.TaggingConfig`),
runs :func:`pipelines.tagging.run.generate_tagging`, and writes:

- ``data/generated/tagging/{predictions,traces,sft}.jsonl``
- ``reports/generate_tagging/{metrics.json,usage.json,table.md,metrics.png}``

    python -m stages.generate_tagging [--params params.yaml] [--section tagging]
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipelines.stage import stage_setup, write_metrics
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from pipelines.tracking import stage_run

log = logging.getLogger("edumas.stages.generate_tagging")


def summary_line(metrics: dict) -> str:
    parts = [
        f"{name}: acc {m['overall']['accuracy']:.3f} F1 {m['overall']['f1']:.3f}"
        for name, m in metrics["systems"].items()
    ]
    return f"{metrics['n_evaluated']} pairs evaluated; " + "; ".join(parts) + f"; {metrics['sft_rows']} SFT rows"


def main(argv: list[str] | None = None) -> dict:
    _, cfg = stage_setup("generate_tagging", "tagging", TaggingConfig, argv)
    with stage_run("generate_tagging", cfg.model_dump()) as run:
        metrics = generate_tagging(cfg)
        write_metrics(Path(cfg.outputs.reports_dir) / "metrics.json", metrics, run)
    log.info("%s", summary_line(metrics))
    return metrics


if __name__ == "__main__":
    main()
