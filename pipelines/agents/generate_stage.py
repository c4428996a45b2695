"""The body every ``generate_<team>`` stage shares (:func:`run_generate_stage`): the generic stage
runner of :mod:`pipelines.stage` with a ``--shard`` option (:mod:`pipelines.agents.shards`) and the
shortfall report (:mod:`pipelines.agents.shortfalls`). It lives with the agents, not in
``pipelines.stage``, so that the stage runner stays below the layers it serves."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pipelines.agents.shards import ShardConfig
from pipelines.agents.shortfalls import flag_shortfalls
from pipelines.config import ConfigError
from pipelines.stage import run_stage, stage_setup_sections, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger(__name__)


def run_generate_stage(
    stage: str,
    sections: dict[str, type[BaseModel]],
    generate: Callable[[dict[str, Any]], dict[str, Any]],
    summary: Callable[[dict[str, Any]], str],
    argv: list[str] | None = None,
    *,
    shortfalls: Callable[[dict[str, Any], dict[str, Any]], list] | None = None,
) -> int:
    """The body every ``generate_<team>`` stage shares, through :func:`run_stage`: load ``sections``
    (the first is the team's own, whose ``outputs.reports_dir`` receives ``metrics.json``; a shard's
    folder there with ``--shard INDEX/COUNT``, which sets the section's ``shard``), open the
    stage's W&B run, call ``generate(cfgs)`` for the metrics, write them, log ``summary(metrics)``.
    ``shortfalls(cfgs, metrics)`` names what was requested and not produced
    (:mod:`pipelines.agents.shortfalls`): each is a WARNING in the log and a row of
    ``metrics["shortfalls"]``. Returns the exit code."""

    def shard_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--shard",
            metavar="INDEX/COUNT",
            help="run only shard INDEX of COUNT (0-based, e.g. $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT); "
            "merge with python -m stages.merge_shards",
        )

    def body() -> int:
        args, cfgs = stage_setup_sections(stage, sections, argv, add_arguments=shard_option)
        first = next(iter(sections))
        if args.shard is not None:
            try:
                cfgs[first] = cfgs[first].model_copy(update={"shard": ShardConfig.parse(args.shard)})
            except ValueError as exc:
                raise ConfigError(f"--shard {args.shard}: {exc}") from None
        cfg = cfgs[first]
        with stage_run(stage, cfg.model_dump()) as run:
            metrics = generate(cfgs)
            if shortfalls is not None:
                metrics["shortfalls"] = flag_shortfalls(stage, shortfalls(cfgs, metrics))
            outputs = cfg.shard.outputs(cfg.outputs) if hasattr(cfg, "shard") else cfg.outputs
            write_metrics(Path(outputs.reports_dir) / "metrics.json", metrics, run)
        log.info("%s", summary(metrics))
        return 0

    return run_stage(body, argv)

