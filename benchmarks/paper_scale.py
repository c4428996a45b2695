"""The papers' scale on one machine: each generation stage with the paper profile's item counts
against simulated vLLM servers (compressed time), then make_datasets, 16 shards and their merge,
a SIGKILL at half and a rerun, and the projection of a real run (docs/scale.md).

    python benchmarks/paper_scale.py                    # everything, the paper's counts (hours on 2 cores)
    python benchmarks/paper_scale.py --fraction 0.02    # the same at 2 % of the items (minutes)
    python benchmarks/paper_scale.py --steps project    # rewrite the projection from saved results
    python benchmarks/paper_scale.py --fraction 0.02 --team-fractions tagging=1,kgc=0.25   # per team
    python benchmarks/paper_scale.py --steps runs --teams ram2c --fraction 0.01 --embedder-backend onnx

Steps (``--steps``, in this order; each saves its figures in ``<work>/results.json``):

- ``setup``: the work project (``--work``), prepare_models and build_kb there;
- ``runs``: generate_tagging, generate_kgc, generate_ram2c with ``--servers`` simulated servers
  (one per A100 of the projection), each measured: wall time against the servers' critical-path
  bound, the stage's CPU per LLM call, peak RSS, bytes of traces and outputs per item; the CPU per
  call split by component (``benchmarks/scale/cpu_split.py``: start-up, embedding, store, runtime,
  team, other threads, exit; tagging's baselines apart), printed with the embedding's share;
- ``rss``: the same stages at 10 % and 50 % of the items (peak RSS against item count);
- ``datasets``: make_datasets on the three teams' rows;
- ``shards``: each team as 16 shards, 16 processes each with its own simulated server (the Slurm
  array's launch file), merged, compared file by file with the one run; the shards' CPU printed
  against the one run's, stage processes alone (like with like) and whole process trees;
- ``kill``: ``--kill-team``'s stage SIGKILLed when about half its calls are answered, then rerun:
  the calls sent again are counted (none of those finished before the kill), outputs compared;
- ``project``: ``reports/scale_projection.md`` and ``.json`` (hours on 8 x A100, dollars at the
  list prices of ``benchmarks/prices.yaml``, per team and in total), extrapolated from each team's
  fraction to the paper's counts (``benchmarks/scale/projection.py`` says how).

Figures of a run on the development machine are in docs/scale.md; measure on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale.compare import same_outputs  # noqa: E402
from benchmarks.scale.projection import load_prices, write_projection  # noqa: E402
from benchmarks.scale.projection import project as project_costs  # noqa: E402
from benchmarks.scale.runs import critical_path_bound, items_of, llm_window, output_bytes, run_stage  # noqa: E402
from benchmarks.scale.sharded import prepare, run_shards  # noqa: E402
from pipelines.io import write_json_atomic  # noqa: E402
from tests.support.paper_workspace import (  # noqa: E402
    TEAMS,
    effective_fractions,
    make_workspace,
    paper_params,
    ran_fraction,
    scaled_counts,
    served_names,
    write_params,
)
from tests.support.simserver import EngineModel, SimCluster  # noqa: E402

STEPS = ("setup", "runs", "rss", "datasets", "shards", "kill", "project")


def cache_rows(path: Path) -> dict[str, float]:
    """Request key -> creation time of every finished call in a request cache file."""
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT key, created FROM calls").fetchall())


def concepts(project: Path) -> int:
    """Knowledge ids among the tagging run's pairs."""
    rows = (project / "data/generated/tagging/predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return len({json.loads(row)["knowledge_id"] for row in rows})


def split_line(team: str, split: dict[str, Any]) -> str:
    """The stage's CPU per LLM call by component, one line (benchmarks/scale/cpu_split.py)."""
    parts = ("startup", "embedding", "store", "runtime", "team", "other_threads", "children", "exit")
    total = split["total"]
    line = ", ".join(f"{k} {split[k]:.2f}" for k in parts if k in split)
    share = 100 * split["embedding"] / total if total else 0.0
    extra = f"; baselines {split['baselines_s']:.1f} s apart" if split["baselines_s"] else ""
    return (f"{team}: stage CPU per call {total:.2f} ms = {line} (embedding {share:.0f} %; start-up "
            f"{split['startup_s']:.1f} s, {split['startup_embedding_s']:.1f} s of it embedding{extra})")


def shards_line(team: str, row: dict[str, Any], one_run_cpu_s: float | None) -> str:
    """The shards' CPU against the one run's: the stage processes alone (like with like) and their
    whole process trees (launch script, helper Pythons, own simulated server)."""
    def ratio(cpu: float | None) -> str:
        return f" = {cpu / one_run_cpu_s:.2f} x the one run's {one_run_cpu_s:.1f} s" if cpu and one_run_cpu_s else ""

    stages = [s["stage_cpu_s"] for s in row["shards"] if s.get("stage_cpu_s") is not None]
    each = f" ({min(stages):.1f} to {max(stages):.1f} s each)" if stages else ""
    stage = f"{row['stage_cpu_s']:.1f} s{ratio(row['stage_cpu_s'])}{each}" if row.get("stage_cpu_s") else "not measured"
    return (f"{team}: {row['count']} shards, stage processes' CPU {stage}; process trees' CPU "
            f"{row['tree_cpu_s']:.1f} s{ratio(row['tree_cpu_s'])}")


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.work = Path(args.work).resolve()
        self.results_path = self.work / "results.json"
        self.results: dict[str, Any] = json.loads(self.results_path.read_text()) if self.results_path.exists() else {}
        self.model = EngineModel(compression=args.compression)
        self.log_dir = self.work / "server-logs"
        self.shared = Path(args.shared) if args.shared else None

    def save(self) -> None:
        write_json_atomic(self.results_path, self.results)

    def fractions(self, share: float = 1.0) -> dict[str, float]:
        """Each team's share of the paper's counts: ``--fraction`` or ``--team-fractions``, times ``share``."""
        return {team: share * self.args.team_fractions.get(team, self.args.fraction) for team in TEAMS}

    def params(self, urls: list[str], share: float = 1.0) -> dict[str, Any]:
        params = paper_params(urls={team: urls for team in TEAMS}, fractions=self.fractions(share))
        if self.args.embedder_backend:  # the knowledge base's and KGC's demonstrations' embedder
            params["build_kb"]["embedder"]["backend"] = self.args.embedder_backend
            params["kgc"]["embedder"]["backend"] = self.args.embedder_backend
        return params

    def project_for(self, name: str, urls: list[str], share: float = 1.0) -> Path:
        project = make_workspace(self.work / name, shared=self.shared)
        main = self.work / "main" / "project"
        if project != main:
            for link in ("models", "data/kb"):
                if not (project / link).exists() and (main / link).exists():
                    if link == "data/kb":
                        shutil.copytree(main / link, project / link)
                    else:
                        (project / link).symlink_to(main / link, target_is_directory=True)
        write_params(project, self.params(urls, share))
        return project

    def measure(self, project: Path, team: str, urls: list[str], **options: Any) -> dict[str, Any]:
        run = run_stage(project, f"generate_{team}", urls=urls, split=self.args.cpu_split, **options)
        concurrency = self.params(urls)[team]["concurrency"]
        bound_v = critical_path_bound(run.servers, self.model, concurrency) if run.calls else 0.0
        wall_v = run.wall_s * self.args.compression
        window = llm_window(self.log_dir, run.started, run.ended, self.args.compression)
        window_v = window * self.args.compression if window is not None else None
        items = items_of(project, team)
        usage_path = project / "reports" / f"generate_{team}" / "usage.json"
        usage = json.loads(usage_path.read_text())["total"] if usage_path.exists() else {}
        sizes = output_bytes(project, team)
        row = {
            **run.to_dict(),
            "team": team,
            "items": items,
            "usage": {k: usage.get(k) for k in ("calls", "cache_hits", "prompt_tokens", "completion_tokens")},
            "wall_virtual_s": round(wall_v, 1),
            "llm_phase_s": round(window, 2) if window is not None else None,
            "llm_phase_virtual_s": round(window_v, 1) if window_v is not None else None,
            "bound_virtual_s": round(bound_v, 1),
            "bound_ratio": round(window_v / bound_v, 3) if bound_v and window_v else None,
            "stage_ratio": round(wall_v / bound_v, 3) if bound_v else None,
            "bytes_per_item": {k: round(v / items) for k, v in sizes.items()} if items else None,
            "bytes": sizes,
        }
        if run.returncode != 0 and run.killed_at_calls is None:
            row["log_tail"] = run.log
        return row

    # the steps ---------------------------------------------------------------------------------

    def setup(self, cluster: SimCluster) -> None:
        project = self.project_for("main", cluster.urls)
        for stage in ("prepare_models", "build_kb"):
            run = run_stage(project, stage, urls=[])
            self.results.setdefault("setup", {})[stage] = run.to_dict() | {"log_tail": run.log[-600:]}
            if run.returncode != 0:
                raise SystemExit(f"{stage} failed in {project}:\n{run.log}")

    def runs(self, cluster: SimCluster) -> None:
        project = self.project_for("main", cluster.urls)
        self.results["counts"] = scaled_counts(self.params(cluster.urls))
        requested = effective_fractions(self.params(cluster.urls))
        for team in self.args.teams:
            for cache in (project / "data/cache").glob(f"{team}*.sqlite*"):
                cache.unlink()  # a fresh run: every call goes to the servers
            row = self.measure(project, team, cluster.urls)
            self.results.setdefault("runs", {})[team] = row
            self.results.setdefault("requested_fractions", {})[team] = requested[team]
            self.results.setdefault("fractions", {})[team] = ran_fraction(team, row["items"], requested[team])
            self.save()
            print(json.dumps({k: row[k] for k in ("team", "items", "calls", "wall_s", "bound_ratio", "cpu_ms_per_call",
                                                  "stage_ratio", "peak_rss_mb")}), flush=True)
            if "cpu_split" in row:
                print(split_line(team, row["cpu_split"]), flush=True)

    def rss(self, cluster: SimCluster) -> None:
        for share in (0.1, 0.5):
            project = self.project_for(f"rss-{share:g}", cluster.urls, share)
            for team in self.args.teams:
                row = self.measure(project, team, cluster.urls)
                self.results.setdefault("rss", {}).setdefault(team, {})[f"{share:g}"] = {
                    k: row[k] for k in ("items", "calls", "peak_rss_mb", "wall_s", "cpu_ms_per_call", "bound_ratio")
                }
                self.save()

    def datasets(self, cluster: SimCluster) -> None:
        project = self.work / "main" / "project"
        run = run_stage(project, "make_datasets", urls=[])
        card = project / "data/train/data_card.json"
        self.results["datasets"] = run.to_dict() | {
            "data_card": json.loads(card.read_text()) if card.exists() else None, "log_tail": run.log[-600:]
        }

    def shards(self, cluster: SimCluster) -> None:
        main = self.work / "main" / "project"
        for team in self.args.shard_teams:
            params = self.params(["http://127.0.0.1:8000/v1"])
            project = prepare(self.work / f"shards-{team}", main, params, team, shared=self.shared)
            shutil.rmtree(project / "data/generated" / team, ignore_errors=True)
            for cache in (project / "data/cache").glob(f"{team}*.sqlite*"):
                cache.unlink()  # fresh shards, as the one run: every call goes to the servers
            count = self.args.shard_count
            if team == "tagging":  # one concept's pairs stay in one shard: no more shards than concepts
                count = min(count, concepts(main))
            if count < 2:
                self.results.setdefault("shards", {})[team] = {"skipped": f"{count} concept(s): nothing to shard"}
                continue
            row = run_shards(project, team, count=count, compression=self.args.compression,
                             parallel=self.args.shard_parallel, cpu_split=self.args.cpu_split)
            row["equal_to_one_run"] = same_outputs(team, main, project) if row["merge_returncode"] == 0 else None
            one = self.results.get("runs", {}).get(team, {}).get("cpu_s")
            row["one_run_cpu_s"] = one
            self.results.setdefault("shards", {})[team] = row
            self.save()
            print(json.dumps({k: row[k] for k in ("count", "failed_shards", "shards_wall_s", "merge_returncode",
                                                  "equal_to_one_run")} | {"team": team}), flush=True)
            print(shards_line(team, row, one), flush=True)

    def kill(self, cluster: SimCluster) -> None:
        team = self.args.kill_team
        main = self.work / "main" / "project"
        total = self.results["runs"][team]["calls"]
        project = self.project_for(f"kill-{team}", cluster.urls)
        shutil.rmtree(project / "data/cache", ignore_errors=True)
        shutil.rmtree(project / "data/generated" / team, ignore_errors=True)
        first = self.measure(project, team, cluster.urls, kill_after_calls=total // 2)
        at_kill = cache_rows(project / "data/cache" / f"{team}.sqlite")
        second = self.measure(project, team, cluster.urls)
        after = cache_rows(project / "data/cache" / f"{team}.sqlite")
        # a finished call sent again would be written again: its row's creation time would change
        repeated = sum(1 for key, created in at_kill.items() if after.get(key) != created)
        self.results["kill"] = {
            "team": team,
            "calls_of_one_run": total,
            "killed_after_calls_answered": first["killed_at_calls"],
            "killed_returncode": first["returncode"],
            "cached_at_kill": len(at_kill),
            "answered_not_cached_at_kill": first["calls"] - len(at_kill),
            "rerun_calls_sent": second["calls"],
            "rerun_cache_hits": second["usage"]["cache_hits"],
            "calls_sent_in_both_runs": first["calls"] + second["calls"],
            "finished_calls_repeated": repeated,
            "cache_rows_after": len(after),
            "rerun_returncode": second["returncode"],
            "identical_outputs": same_outputs(team, main, project) if second["returncode"] == 0 else "rerun failed",
            "rerun": {k: second[k] for k in ("wall_s", "cpu_s", "peak_rss_mb")},
        }
        self.save()
        print(json.dumps(self.results["kill"]), flush=True)

    def project(self) -> Path:
        prices = load_prices()
        runs = self.results["runs"]
        counts = self.results.get("counts", {})
        runs_load = self.results.get("step_load_average", {}).get("runs") or [os.getloadavg()[0]] * 2
        fractions = self.results.get("fractions") or {t: self.args.fraction for t in TEAMS}
        ram2c, kgc, tagging = counts.get("ram2c", {}), counts.get("kgc", {}), counts.get("tagging", {})
        line = (
            f"RAM2C {ram2c.get('dialogues')} dialogues x {ram2c.get('turns')} turns, {ram2c.get('experts_per_group')} "
            f"experts per group; KGC {kgc.get('sample_per_dataset')} sentences per dataset, shots {kgc.get('shots')}, "
            f"{kgc.get('rounds')} rounds, systems {', '.join(kgc.get('systems', []))}; tagging "
            + (f"{tagging['evaluation_limit']} evaluation and {tagging['generation_limit']} generation pairs"
               if tagging.get("evaluation_limit") else "the full demo splits")
            + "; written: " + ", ".join(f"{t} {runs[t]['items']} items" for t in TEAMS if t in runs)
        )
        result = {
            "measured_on": f"{os.cpu_count()} CPUs, load average {runs_load[0]:.1f} when the runs started, "
            f"{runs_load[1]:.1f} when they ended",
            "servers": self.args.servers,
            "compression": self.args.compression,
            "command": " ".join(["python benchmarks/paper_scale.py", *sys.argv[1:]]),
            "counts_line": line,
            "fractions": fractions,
            "projection": project_costs({t: runs[t] for t in TEAMS if t in runs}, self.model, prices,
                                        fractions=fractions),
            "results": self.results,
        }
        return write_projection(result, prices, ROOT / "reports")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--work", default="/tmp/edumas-paper-scale", help="work folder (kept: outputs, results)")
    parser.add_argument("--shared", default=None, help="the public data folder (default: the checkout's ../shared)")
    parser.add_argument("--fraction", type=float, default=1.0, help="share of the paper's item counts")
    parser.add_argument("--servers", type=int, default=8, help="simulated servers (A100s of the projection)")
    parser.add_argument("--compression", type=float, default=2.0, help="virtual seconds per real second")
    parser.add_argument("--team-fractions", default="",
                        help="per team, over --fraction: e.g. tagging=1,kgc=0.25 (rss: 10 %% and 50 %% of each)")
    parser.add_argument("--teams", default="tagging,kgc,ram2c")
    parser.add_argument("--shard-teams", default="tagging,kgc,ram2c")
    parser.add_argument("--shard-count", type=int, default=16)
    parser.add_argument("--shard-parallel", type=int, default=4, help="shard processes at once")
    parser.add_argument("--kill-team", default="kgc", choices=list(TEAMS))
    parser.add_argument("--no-cpu-split", dest="cpu_split", action="store_false",
                        help="run the stages bare, without benchmarks/scale/cpu_split.py's per-component accounting")
    parser.add_argument("--embedder-backend", choices=["torch", "onnx"], default=None,
                        help="build_kb.embedder.backend and kgc.embedder.backend (default: the profile's)")
    args = parser.parse_args(argv)
    args.teams = [t for t in args.teams.split(",") if t]
    try:
        pairs = (item.split("=") for item in args.team_fractions.split(",") if item)
        args.team_fractions = {team.strip(): float(share) for team, share in pairs}
    except ValueError:
        parser.error(f"--team-fractions {args.team_fractions!r}: write team=share pairs, e.g. tagging=1,kgc=0.25")
    if set(args.team_fractions) - set(TEAMS) or not all(0 < v <= 1 for v in args.team_fractions.values()):
        parser.error(f"--team-fractions {args.team_fractions}: teams of {', '.join(TEAMS)}, shares in (0, 1]")
    args.shard_teams = [t for t in args.shard_teams.split(",") if t]
    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown steps {unknown}; use {', '.join(STEPS)}")
    bench = Bench(args)
    bench.work.mkdir(parents=True, exist_ok=True)
    bench.results["load_average_start"] = os.getloadavg()[0]
    started = time.perf_counter()
    needs_servers = [s for s in steps if s not in ("project", "datasets", "shards")]
    cluster = None
    if needs_servers:
        names = served_names(bench.params([]))
        cluster = SimCluster(servers=args.servers, compression=args.compression, log_dir=bench.log_dir,
                             served_model_name=names).start()
    try:
        for step in steps:
            begin, load = time.perf_counter(), os.getloadavg()[0]
            if step == "project":
                print(f"projection: {bench.project()}", flush=True)
            else:
                getattr(bench, step)(cluster)
            bench.results.setdefault("step_wall_s", {})[step] = round(time.perf_counter() - begin, 1)
            if step != "project":
                bench.results.setdefault("step_load_average", {})[step] = [round(load, 1), round(os.getloadavg()[0], 1)]
            bench.save()
    finally:
        if cluster is not None:
            cluster.stop()
    bench.results["load_average_end"] = os.getloadavg()[0]
    bench.results["wall_s"] = round(time.perf_counter() - started, 1)
    bench.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
