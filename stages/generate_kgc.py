"""DVC stage ``generate_kgc``: CooperKGC (NER, RE and EE experts over rounds) and its baselines.

Reads the ``kgc`` section of params.yaml (see :class:`pipelines.kgc.config.KGCConfig`), runs
:func:`pipelines.kgc.run.generate_kgc` and writes, under ``kgc.outputs`` (defaults in the config,
the files listed in dvc.yaml):

- ``data/generated/kgc/{predictions,traces,sft}.jsonl``
- ``reports/generate_kgc/{metrics,usage,failures,datasets}.json``, ``{table,per_type}.md``, ``rounds.{csv,png}``

    python -m stages.generate_kgc [--params params.yaml] [--section kgc] [--debug]

Exit codes: 0 done; 1 a missing input, an unreadable dataset file, an LLM failure or more failed
samples than ``max_failed_share``; 2 bad params.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipelines.kgc.config import KGCConfig
from pipelines.kgc.datasets import ReaderError
from pipelines.kgc.run import generate_kgc
from pipelines.stage import StageError, run_stage, stage_setup_sections, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger("edumas.stages.generate_kgc")


def summary_line(metrics: dict) -> str:
    parts = []
    for name, system in metrics["systems"].items():
        f1 = ", ".join(f"{d} {100 * s['overall']['f1']:.1f}" for d, s in system["datasets"].items())
        parts.append(f"{name}: {f1}")
    return (
        f"{metrics['n_evaluated']} sentences ({metrics['output_mode']} mode); F1 % "
        + "; ".join(parts)
        + f"; {metrics['sft_rows']} SFT rows"
    )


def _run(argv: list[str] | None) -> int:
    _, cfgs = stage_setup_sections("generate_kgc", {"kgc": KGCConfig}, argv)
    cfg = cfgs["kgc"]
    with stage_run("generate_kgc", cfg.model_dump()) as run:
        try:
            metrics = generate_kgc(cfg)
        except ReaderError as exc:  # a dataset file that cannot be read: file and line in the message
            raise StageError(str(exc)) from exc
        write_metrics(Path(cfg.outputs.reports_dir) / "metrics.json", metrics, run)
    log.info("%s", summary_line(metrics))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
