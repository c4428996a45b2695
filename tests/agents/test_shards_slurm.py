"""The Slurm array template of sharded generation: it parses, and a task runs its own shard with
its own LLM cache (dry run, Slurm's variables set by hand)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from pipelines.agents.shards import params_fingerprint
from pipelines.config import load_section
from pipelines.kgc.config import KGCConfig

PROJECT = Path(__file__).resolve().parents[2]
SCRIPT = PROJECT / "configs/slurm/generate_shards.sbatch"


def test_template_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    assert "#SBATCH --array=0-3" in SCRIPT.read_text()


def test_array_task_runs_its_shard_with_its_own_cache(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text((PROJECT / "params.yaml").read_text())
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        "SLURM_ARRAY_TASK_ID": "2",
        "SLURM_ARRAY_TASK_COUNT": "4",
        "TEAM": "kgc",
        "PARAMS": str(params),
        "VENV": str(Path(sys.executable).parent.parent),
        "DRY_RUN": "1",
    }
    done = subprocess.run(["bash", str(SCRIPT)], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    command = shlex.split(done.stdout.strip().splitlines()[-1])
    task_params = tmp_path / "params.shard-2-of-4.yaml"
    assert command[1:] == ["-m", "stages.generate_kgc", "--params", str(task_params), "--shard", "2/4"]
    copy = yaml.safe_load(task_params.read_text())
    assert copy["kgc"]["llm"]["cache"].endswith(".shard-2-of-4.sqlite")
    # the copy differs only in the cache: the merge (reading params.yaml) accepts its shard
    assert params_fingerprint(load_section("kgc", KGCConfig, task_params)) == params_fingerprint(
        load_section("kgc", KGCConfig, params)
    )


def test_task_outside_an_array_stops_with_a_message():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "SLURM_ARRAY_TASK_ID" in done.stderr
