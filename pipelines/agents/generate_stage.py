"""The body every ``generate_<team>`` stage shares (:func:`run_generate_stage`): the generic stage
runner of :mod:`pipelines.stage` over a :class:`~pipelines.agents.team_interface.Team`, with a
``--shard`` option (:mod:`pipelines.agents.shards`) and the shortfall report
(:mod:`pipelines.agents.shortfalls`). It lives with the agents, not in ``pipelines.stage``, so that
the stage runner stays below the layers it serves. A stage file is then::

    def main(argv=None) -> int:
        return run_generate_stage(TEAM, argv)
"""

from __future__ import annotations

import argparse
import gc
import logging
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from pipelines.agents.shards import ShardConfig
from pipelines.agents.shortfalls import flag_shortfalls
from pipelines.agents.team_interface import Configs, Team
from pipelines.config import ConfigError
from pipelines.stage import run_stage, stage_setup_sections, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger(__name__)


def load_team_sections(
    team: Team,
    argv: list[str] | None,
    *,
    stage: str,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[argparse.Namespace, Configs]:
    """Parse the stage's arguments, load ``team.sections`` (``--section`` renames the first) and
    give them to :meth:`Team.configure`: the configs every later step sees, final from here on."""
    args, cfgs = stage_setup_sections(stage, team.sections, argv, add_arguments=add_arguments)
    return args, team.configure(cfgs)


def shard_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard",
        metavar="INDEX/COUNT",
        help="run only shard INDEX of COUNT (0-based, e.g. $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT); "
        "merge with python -m stages.merge_shards",
    )


def with_shard(team: Team, cfgs: Configs, *, shard: str | None) -> Configs:
    """``cfgs`` with the team's own section's ``shard`` set from ``--shard INDEX/COUNT`` (when given)."""
    if shard is None:
        return cfgs
    try:
        parsed = ShardConfig.parse(shard)
    except ValueError as exc:
        raise ConfigError(f"--shard {shard}: {exc}") from None
    return {**cfgs, team.own_section: team.own(cfgs).model_copy(update={"shard": parsed})}


def run_generate_stage(team: Team, argv: list[str] | None = None) -> int:
    """The stage ``team.stage``, through :func:`run_stage`: load and configure ``team.sections``
    (a shard of the samples with ``--shard INDEX/COUNT``), open the stage's W&B run, call
    ``team.generate(cfgs)`` for the metrics, add ``team.shortfalls`` (each a WARNING in the log and
    a row of ``metrics["shortfalls"]``), write them to ``metrics.json`` in the own section's
    ``outputs.reports_dir`` (the shard's folder there for a shard), log ``team.summary(metrics)``.
    Returns the exit code."""

    def body() -> int:
        args, cfgs = load_team_sections(team, argv, stage=team.stage, add_arguments=shard_option)
        cfgs = with_shard(team, cfgs, shard=args.shard)
        cfg = team.own(cfgs)
        with stage_run(team.stage, cfg.model_dump()) as run:
            metrics = team.generate(cfgs)
            metrics["shortfalls"] = flag_shortfalls(team.stage, team.shortfalls(cfgs, metrics))
            write_metrics(Path(cfg.shard.outputs(cfg.outputs).reports_dir) / "metrics.json", metrics, run)
        log.info("%s", team.summary(metrics))
        return 0

    return run_stage(body, argv)


def exit_stage_process(code: int) -> NoReturn:
    """End a stage's own process with exit status ``code`` (a stage file's ``__main__`` branch, never
    a function that returns to a caller, e.g. a test calling ``main``). The objects alive now, the
    imported modules' most of all, are first moved out of the garbage collector's reach
    (``gc.freeze``): the interpreter's collections while it tears the modules down would otherwise
    walk every one of them again, about 0.15 to 0.2 s of CPU per process for nothing (everything the
    stage writes is written and closed by now; objects are still freed, only cycles among them are
    left to the process's end)."""
    gc.freeze()
    raise SystemExit(code)
