"""DVC stage ``generate_ram2c``: tutoring dialogues refined by the T/P/E expert groups, as DPO pairs.

Reads the ``ram2c`` section of params.yaml (:class:`pipelines.ram2c.config.Ram2cConfig`) and the
``build_kb`` and ``retrieval`` sections (the knowledge bases the groups read), runs
:func:`pipelines.ram2c.run.generate_ram2c` and writes, under ``ram2c.outputs`` (defaults in the
config, the files listed in dvc.yaml):

- ``data/generated/ram2c/{dpo,sft,dialogues,dropped,traces,predictions}.jsonl``, ``preference/``
  (datasets), ``llamafactory/`` (sharegpt + dataset_info.json), ``topics/``
- ``reports/generate_ram2c/{metrics.json,usage.json,failures.json}``

    python -m stages.generate_ram2c [--params params.yaml] [--section ram2c] [--debug]

Exit codes: 0 done; 1 a missing input (knowledge base, source text), an LLM failure or more failed
samples than ``max_failed_share``; 2 bad params.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.run import generate_ram2c
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.stage import run_stage, stage_setup_sections, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger("edumas.stages.generate_ram2c")
SECTIONS = {"ram2c": Ram2cConfig, "build_kb": BuildKBConfig, "retrieval": RetrievalConfig}


def summary_line(metrics: dict) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in metrics["dropped_by_reason"].items()) or "none"
    return (
        f"{metrics['dialogues']} dialogues, {metrics['pairs_kept']} pairs kept, {metrics['pairs_dropped']} dropped "
        f"({reasons}); {metrics['llm_calls_per_dialogue']} LLM calls per dialogue; {metrics['wall_s']} s"
    )


def _run(argv: list[str] | None) -> int:
    _, cfgs = stage_setup_sections("generate_ram2c", SECTIONS, argv)
    cfg = cfgs["ram2c"]
    with stage_run("generate_ram2c", cfg.model_dump()) as run:
        metrics = generate_ram2c(cfg, cfgs["build_kb"], cfgs["retrieval"])
        write_metrics(Path(cfg.outputs.reports_dir) / "metrics.json", metrics, run)
    log.info("%s", summary_line(metrics))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
