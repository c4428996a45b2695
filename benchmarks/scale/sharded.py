"""16 shards as 16 processes, each against its own simulated server, then the merge.

Each shard runs ``configs/slurm/generate_shards.sbatch`` (the cluster's launch file) with the Slurm
array variables set, ``VLLM_SERVE`` starting a simulated server on 127.0.0.1:8000 and the params'
``base_urls`` naming it, as every node of a cluster reaches its own vLLM server. Shards run in
network namespaces of their own (``unshare -n``, as root), so each one's port 8000 is its own and
``parallel`` shards run at once; where namespaces are not available, one after another on one port.
Every shard gets its own copy of the knowledge base folder (a Chroma folder is one machine's).

Each shard is measured twice: its whole process tree (``os.wait4`` on the launch file: the script,
its helper Pythons, its simulated server and the stage) and its stage process alone (the launch
file's ``VENV`` is a shim, :func:`benchmarks.scale.stage_rusage.python_shim`, that runs the stage
under :mod:`benchmarks.scale.stage_rusage`, and under :mod:`benchmarks.scale.cpu_split` as the one
run is when ``cpu_split``): the stage-only sum is the figure to set against the one run's stage CPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from benchmarks.scale.runs import PROJECT, folder_bytes, split_per_call, stage_env
from benchmarks.scale.stage_rusage import python_shim
from tests.support.paper_workspace import make_workspace, served_names, write_params

PORT = 8000


def namespaces_work() -> bool:
    try:
        done = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def prepare(work: Path, main: Path, params: dict[str, Any], team: str, *, shared: Path | None = None) -> Path:
    """The shard project: the main run's models and a copy of its knowledge base, the params aimed at
    127.0.0.1:8000."""
    project = make_workspace(work, shared=shared)
    if not (project / "models").exists():
        (project / "models").symlink_to(main / "models", target_is_directory=True)
    if team == "ram2c" and not (project / "data/kb").exists():
        shutil.copytree(main / "data/kb", project / "data/kb")
    local = yaml.safe_load(yaml.safe_dump(params))
    for spec in [local[team]["llm"]["default"], *local[team]["llm"].get("roles", {}).values()]:
        if spec.get("kind") == "openai":
            spec["base_urls"] = [f"http://127.0.0.1:{PORT}/v1"]
    write_params(project, local)
    return project


def answered_by(stats: Path) -> int | None:
    """Calls a shard's simulated server answered (its ``--stats`` file), None when it wrote none."""
    try:  # the launch file's exit trap ends the server: its file may be cut short
        return sum(server["counts"]["answered"] for server in json.loads(stats.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stage_figures(stage: Path, split: Path, calls: int | None) -> dict[str, Any]:
    """A shard's stage process alone: CPU, wall, peak RSS, and its CPU per call by component."""
    if not stage.is_file():
        return {"stage_cpu_s": None}
    own = json.loads(stage.read_text(encoding="utf-8"))
    row = {f"stage_{k}": own[k] for k in ("cpu_s", "wall_s", "peak_rss_mb", "returncode")} | {"calls": calls}
    if split.is_file():
        figures = json.loads(split.read_text(encoding="utf-8"))
        row["calls"] = calls = calls or figures["chats"]  # else the LLM.chat calls (its cache is fresh)
        row["stage_cpu_split"] = split_per_call(figures, own["cpu_s"], calls)
    return row


def run_shards(
    project: Path, team: str, *, count: int, compression: float, parallel: int, cpu_split: bool = True
) -> dict[str, Any]:
    """Every shard (see the module docstring), then ``stages.merge_shards``; returns timings, the
    process trees' CPU and the stage processes' own."""
    isolated = namespaces_work()
    parallel = parallel if isolated else 1
    stats_dir = project / "logs" / f"shards-{team}"
    stats_dir.mkdir(parents=True, exist_ok=True)
    script = PROJECT / "configs/slurm/generate_shards.sbatch"
    names = " ".join(served_names(yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))))

    def one(index: int) -> dict[str, Any]:
        stage_json, split_json = stats_dir / f"stage-{index}.json", stats_dir / f"stage-{index}.cpu_split.json"
        for stale in (stage_json, split_json, stats_dir / f"server-{index}.json"):
            stale.unlink(missing_ok=True)
        venv = python_shim(stats_dir / f"python-{index}", out=stage_json, python=sys.executable,
                           cpu_split=split_json if cpu_split else None)
        serve = (
            f"{sys.executable} -m tests.support.simserver --port {PORT} --compression {compression:g} "
            f"--stats {stats_dir / f'server-{index}.json'} --served-model-name {names}"
        )
        env = {
            **stage_env(),
            "SLURM_ARRAY_TASK_ID": str(index),
            "SLURM_ARRAY_TASK_COUNT": str(count),
            "SLURM_SUBMIT_DIR": str(project),
            "TEAM": team,
            "PARAMS": "params.yaml",
            "VENV": str(venv),
            "VLLM_SERVE": serve,
            "VLLM_HEALTH_URL": f"http://127.0.0.1:{PORT}/health",
            "VLLM_WAIT_S": "300",
        }
        command = ["bash", str(script)]
        if isolated:
            command = ["unshare", "-n", "bash", "-c", f"ip link set lo up && exec bash {script}"]
        start = time.perf_counter()
        with (stats_dir / f"shard-{index}.log").open("w") as log:
            process = subprocess.Popen(command, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
        return {
            "shard": index,
            "returncode": process.returncode,
            "wall_s": round(time.perf_counter() - start, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            **stage_figures(stage_json, split_json, answered_by(stats_dir / f"server-{index}.json")),
        }

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        shards = list(pool.map(one, range(count)))
    shards_wall = time.perf_counter() - start
    stage_cpu = [s["stage_cpu_s"] for s in shards]
    merge_start = time.perf_counter()
    with (stats_dir / "merge.log").open("w") as log:
        merged = subprocess.run(
            [sys.executable, "-m", "stages.merge_shards", "--team", team, "--params", "params.yaml"],
            cwd=project, env=stage_env(), stdout=log, stderr=subprocess.STDOUT,
        )
    return {
        "count": count,
        "isolated_namespaces": isolated,
        "parallel": parallel,
        "shards": shards,
        "failed_shards": [s["shard"] for s in shards if s["returncode"] != 0],
        "shards_wall_s": round(shards_wall, 1),
        "tree_cpu_s": round(sum(s["cpu_s"] for s in shards), 1),
        "stage_cpu_s": round(sum(stage_cpu), 1) if None not in stage_cpu else None,
        "merge_returncode": merged.returncode,
        "merge_wall_s": round(time.perf_counter() - merge_start, 1),
        "shard_folders_bytes": folder_bytes(project / "data/generated" / team / "shards"),
    }
