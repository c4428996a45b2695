"""Waves per team in batch mode: each generation stage of the paper profile (at ``--fraction`` of its
items) with every OpenAI-compatible backend in ``mode: batch``, against one simulated server's batch
API; per team the batches the server received (one per wave: no wave here reaches the 50,000-line
or 200 MB limit, and no faults are injected), the lines in them, the samples and the wall time.

    python benchmarks/batch_waves.py --fraction 0.02        # minutes on 2 cores
    python benchmarks/batch_waves.py --teams kgc --fraction 0.1

Each stage's ``concurrency`` is raised to ``--concurrency`` (in batch mode it bounds the calls in
batches at once, so the default of the paper profile would cut every wave at 256 lines). The
figures are written to ``<work>/batch_waves.json`` and printed; docs/batch.md quotes a run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale.runs import items_of, run_stage, server_stats  # noqa: E402
from pipelines.io import write_json_atomic  # noqa: E402
from tests.support.paper_workspace import (  # noqa: E402
    TEAMS,
    make_workspace,
    paper_params,
    scaled_counts,
    served_names,
    write_params,
)
from tests.support.simserver import SimCluster  # noqa: E402


def batch_params(urls: list[str], *, fraction: float, concurrency: int, poll_s: float) -> dict[str, Any]:
    """The paper-scale params with every openai backend of the teams in batch mode."""
    params = paper_params(urls={team: urls for team in TEAMS}, fraction=fraction)
    for team in TEAMS:
        llm = params[team]["llm"]
        for spec in [llm["default"], *(llm.get("roles") or {}).values()]:
            if spec.get("kind") == "openai":
                spec.update(mode="batch", batch={"poll_interval_s": poll_s, "settle_s": 0.02})
        params[team]["concurrency"] = concurrency
    return params


def counts(urls: list[str]) -> dict[str, int]:
    stats = server_stats(urls)
    return {k: sum(s["counts"][k] for s in stats) for k in ("batches", "batch_items", "answered")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/edumas-batch-waves", help="work folder (kept)")
    parser.add_argument("--fraction", type=float, default=0.02, help="share of the paper's item counts")
    parser.add_argument("--teams", default=",".join(TEAMS))
    parser.add_argument("--concurrency", type=int, default=50_000)
    parser.add_argument("--batch-delay-s", type=float, default=0.2, help="real seconds each batch runs")
    parser.add_argument("--compression", type=float, default=50.0)
    args = parser.parse_args(argv)
    work = Path(args.work)
    project = make_workspace(work)
    names = served_names(batch_params(["http://127.0.0.1:1/v1"], fraction=1.0, concurrency=1, poll_s=1.0))
    results: dict[str, Any] = {"fraction": args.fraction, "concurrency": args.concurrency, "teams": {}}
    with SimCluster(
        servers=1, compression=args.compression, served_model_name=names, batch_delay_s=args.batch_delay_s
    ) as cluster:
        params = batch_params(cluster.urls, fraction=args.fraction, concurrency=args.concurrency, poll_s=0.05)
        results["counts"] = scaled_counts(params)
        write_params(project, params)
        for stage in ("prepare_models", "build_kb"):
            run = run_stage(project, stage, urls=[])
            if run.returncode != 0:
                raise SystemExit(f"{stage} failed in {project}:\n{run.log}")
        for team in args.teams.split(","):
            shutil.rmtree(project / "data/cache", ignore_errors=True)  # every call goes to the server
            before = counts(cluster.urls)
            run = run_stage(project, f"generate_{team}", urls=cluster.urls)
            after = counts(cluster.urls)
            usage_path = project / "reports" / f"generate_{team}" / "usage.json"
            usage = json.loads(usage_path.read_text())["total"] if usage_path.exists() else {}
            row = {
                "returncode": run.returncode,
                "samples": items_of(project, team),
                "calls": usage.get("calls"),
                "waves": after["batches"] - before["batches"],
                "batch_lines": after["batch_items"] - before["batch_items"],
                "online_requests": after["answered"] - before["answered"],
                "wall_s": round(run.wall_s, 1),
            }
            if run.returncode != 0:
                row["log_tail"] = run.log[-1500:]
            results["teams"][team] = row
            write_json_atomic(work / "batch_waves.json", results)
            print(json.dumps({"team": team, **{k: v for k, v in row.items() if k != "log_tail"}}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
