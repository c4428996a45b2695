"""Merge the shards of a generate stage into the files one run writes (``dvc repro`` then sees them).

After ``python -m stages.generate_<team> --shard INDEX/COUNT`` ran for every INDEX (a Slurm array,
one shard per node), this checks that every shard is there and complete and ran with these params,
writes the team's predictions, traces and exports in the order one run gives, the shared files,
``usage.json`` and ``failures.json``, and recomputes the metrics and reports through the team's
own finishing function (the one a run calls), all under the section's ``outputs``:

    python -m stages.merge_shards --team tagging|kgc|ram2c [--params params.yaml] [--section NAME] [--count N]

``--team`` takes any team of :mod:`pipelines.teams`; its sections are loaded and configured as its
generate stage does, so the params fingerprint is the one every shard recorded. ``--count`` is
needed only when shard folders of several counts are present. Exit codes: 0 merged; 1 a shard
missing, incomplete, from other params or not covering the samples; 2 bad params.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipelines import teams
from pipelines.agents.generate_stage import load_team_sections
from pipelines.agents.merge import merge_shard_outputs
from pipelines.agents.shards import ShardConfig
from pipelines.agents.shortfalls import flag_shortfalls
from pipelines.stage import run_stage, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger("edumas")


def _run(argv: list[str] | None) -> int:
    team_parser = argparse.ArgumentParser(add_help=False)
    team_parser.add_argument("--team", choices=teams.names())
    known, _ = team_parser.parse_known_args(argv)
    team = teams.get(known.team or teams.names()[0])  # the full parser below requires --team

    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--team", choices=teams.names(), required=True, help="whose shards")
        parser.add_argument("--count", type=int, default=None, help="shard count (default: the one found)")

    args, cfgs = load_team_sections(team, argv, stage="merge_shards", add_arguments=options)
    cfg = team.own(cfgs)
    outputs = ShardConfig().outputs(cfg.outputs)  # the folders one run writes
    with stage_run(f"merge_shards_{team.name}", cfg.model_dump()) as run:
        merged = merge_shard_outputs(outputs, fingerprint=team.fingerprint(cfgs), count=args.count)
        metrics = team.finish(cfgs, outputs, merged.report, context=merged.context, counters=merged.counters)
        metrics["shortfalls"] = flag_shortfalls(team.stage, team.shortfalls(cfgs, metrics))  # as one run
        write_metrics(Path(outputs.reports_dir) / "metrics.json", metrics, run)
    log.info(
        "merged %d shards of %s: %d samples, %s", merged.count, team.name, merged.report.samples, merged.report.written
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
