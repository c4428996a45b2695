"""Merge the shards of a generate stage into the files one run writes (``dvc repro`` then sees them).

After ``python -m stages.generate_<team> --shard INDEX/COUNT`` ran for every INDEX (a Slurm array,
one shard per node), this checks that every shard is there and complete and ran with these params,
writes the team's predictions, traces and exports in the order one run gives, the shared files,
``usage.json`` and ``failures.json``, and recomputes the metrics and reports through the team's
own finishing function (the one a run calls), all under the section's ``outputs``:

    python -m stages.merge_shards --team tagging|kgc|ram2c [--params params.yaml] [--section NAME] [--count N]

``--count`` is needed only when shard folders of several counts are present. Exit codes: 0 merged;
1 a shard missing, incomplete, from other params or not covering the samples; 2 bad params.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipelines.agents.merge import merge_shard_outputs
from pipelines.agents.shards import ShardConfig, params_fingerprint
from pipelines.agents.shortfalls import flag_shortfalls
from pipelines.kgc.config import KGCConfig
from pipelines.kgc.run import finish_kgc
from pipelines.ram2c.run import finish_ram2c, team_retrieval_config
from pipelines.stage import run_stage, stage_setup_sections, write_metrics
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import finish_tagging
from pipelines.tracking import stage_run
from stages import generate_kgc, generate_ram2c, generate_tagging

log = logging.getLogger("edumas")


def _teams() -> dict:
    """team -> (params sections, finishing function, the stage's shortfalls)."""
    return {
        "tagging": ({"tagging": TaggingConfig}, finish_tagging, generate_tagging.shortfalls),
        "kgc": ({"kgc": KGCConfig}, finish_kgc, generate_kgc.shortfalls),
        "ram2c": (generate_ram2c.SECTIONS, finish_ram2c, generate_ram2c.shortfalls),
    }


def _run(argv: list[str] | None) -> int:
    team_parser = argparse.ArgumentParser(add_help=False)
    team_parser.add_argument("--team", choices=["tagging", "kgc", "ram2c"])
    known, _ = team_parser.parse_known_args(argv)
    sections, finish, shortfalls = _teams()[known.team or "tagging"]  # the full parser below requires --team

    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--team", choices=["tagging", "kgc", "ram2c"], required=True, help="whose shards")
        parser.add_argument("--count", type=int, default=None, help="shard count (default: the one found)")

    args, cfgs = stage_setup_sections("merge_shards", sections, argv, add_arguments=options)
    cfg = cfgs[next(iter(sections))]
    outputs = ShardConfig().outputs(cfg.outputs)  # the folders one run writes
    if args.team == "ram2c":  # generate_ram2c fingerprints the retrieval it ran: ram2c.n_rewrites over retrieval's
        cfgs = {**cfgs, "retrieval": team_retrieval_config(cfgs["ram2c"], cfgs["retrieval"])}
    fingerprint = params_fingerprint(*cfgs.values())
    with stage_run(f"merge_shards_{args.team}", cfg.model_dump()) as run:
        merged = merge_shard_outputs(outputs, fingerprint=fingerprint, count=args.count)
        metrics = finish(cfg, outputs, merged.report, context=merged.context, counters=merged.counters)
        metrics["shortfalls"] = flag_shortfalls(f"generate_{args.team}", shortfalls(cfgs, metrics))  # as one run
        write_metrics(Path(outputs.reports_dir) / "metrics.json", metrics, run)
    log.info(
        "merged %d shards of %s: %d samples, %s", merged.count, args.team, merged.report.samples, merged.report.written
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
