"""DVC stage ``generate_ram2c``: tutoring dialogues refined by the T/P/E expert groups, as DPO pairs.

Reads the ``ram2c`` section of params.yaml (:class:`pipelines.ram2c.config.Ram2cConfig`) and the
``build_kb`` and ``retrieval`` sections (the knowledge bases the groups read), runs
:func:`pipelines.ram2c.run.generate_ram2c`, and writes:

- ``data/generated/ram2c/{dpo,sft,dialogues,traces,dropped}.jsonl``, ``preference/`` (datasets),
  ``llamafactory/`` (sharegpt + dataset_info.json)
- ``reports/generate_ram2c/{metrics.json,usage.json}``

    python -m stages.generate_ram2c [--params params.yaml] [--section ram2c]
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from pipelines.config import ConfigError, load_section
from pipelines.llm.types import LLMError
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.run import generate_ram2c
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.stage import stage_setup, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger("edumas.stages.generate_ram2c")


def summary_line(metrics: dict) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in metrics["dropped_by_reason"].items()) or "none"
    return (
        f"{metrics['dialogues']} dialogues, {metrics['pairs_kept']} pairs kept, {metrics['pairs_dropped']} dropped "
        f"({reasons}); {metrics['llm_calls_per_dialogue']} LLM calls per dialogue; {metrics['wall_s']} s"
    )


def main(argv: list[str] | None = None) -> int:
    args, cfg = stage_setup("generate_ram2c", "ram2c", Ram2cConfig, argv)
    try:
        build_cfg = load_section("build_kb", BuildKBConfig, Path(args.params))
        retrieval_cfg = load_section("retrieval", RetrievalConfig, Path(args.params))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with stage_run("generate_ram2c", cfg.model_dump()) as run:
        try:
            metrics = generate_ram2c(cfg, build_cfg, retrieval_cfg)
        except (FileNotFoundError, LLMError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        write_metrics(Path(cfg.outputs.reports_dir) / "metrics.json", metrics, run)
    log.info("%s", summary_line(metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
