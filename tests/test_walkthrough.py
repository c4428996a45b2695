"""The real-scale walkthrough (docs/clusters.md, "A real-scale run, step by step") as far as it runs
on CPU, on the smoke profile, in a fresh copy of the project: step 2 (params from profiles) and
step 4 (a Slurm array task per shard, each starting its own server with ``VLLM_SERVE``, then the
merge). The served model is the loopback OpenAI-compatible server started the way ``vllm serve``
is, answering only the names it serves; a server that serves the model under its path stops the
task at its start-up check instead of failing every request. The training steps (5, 6) are not
run here; ``tests/test_end_to_end.py`` runs every stage of ``dvc repro`` on the smoke profile."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.test_end_to_end import _project_copy

ROOT = Path(__file__).resolve().parents[1]
MODEL = "Qwen2.5-7B-Instruct"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(project: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PYTHONPATH=str(project), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", EDUMAS_TRACKING="0",
               WANDB_MODE="disabled", EDUMAS_LOG_LEVEL="WARNING", VENV=str(Path(sys.executable).parent.parent))
    return env | extra


def _shard_task(project: Path, index: int, *, served_as: str, port: int) -> subprocess.CompletedProcess:
    serve = f"{sys.executable} -m pipelines.llm.loopback --port {port} --served-model-name {served_as}"
    env = _env(project, TEAM="tagging", SLURM_ARRAY_TASK_ID=str(index), SLURM_ARRAY_TASK_COUNT="2",
               VLLM_SERVE=serve, VLLM_HEALTH_URL=f"http://127.0.0.1:{port}/health", VLLM_WAIT_S="60")
    return subprocess.run(["bash", "configs/slurm/generate_shards.sbatch"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """Step 2: a fresh copy whose params are the smoke profile with every role on the served model."""
    project = tmp_path_factory.mktemp("walkthrough") / "edumas"
    _project_copy(project)
    port = _free_port()
    served = yaml.safe_load((project / "configs/profiles/served.yaml").read_text(encoding="utf-8"))
    assert served["llm"]["default"]["model"] == MODEL
    served["llm"]["default"]["base_urls"] = [f"http://127.0.0.1:{port}/v1"]  # this machine's free port
    (project / "here.yaml").write_text(yaml.safe_dump(served), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "pipelines.profiles", "smoke", "here.yaml", "--write", "params.yaml"],
                   cwd=project, env=_env(project), check=True)
    (project / ".port").write_text(str(port))
    return project


def test_step_2_the_paper_profile_writes_params_every_stage_accepts(project: Path, tmp_path: Path) -> None:
    written = tmp_path / "params.yaml"
    subprocess.run([sys.executable, "-m", "pipelines.profiles", "paper", "--write", str(written)],
                   cwd=project, env=_env(project), check=True)
    params = yaml.safe_load(written.read_text(encoding="utf-8"))
    assert params["llm"]["default"] == {"kind": "openai", "model": MODEL, "base_urls": ["http://127.0.0.1:8000/v1"],
                                        "api_key_env": None}
    check = ("from pipelines.config import load_section; from pipelines.tagging.config import TaggingConfig; "
             "from pipelines.ram2c.config import Ram2cConfig; from pipelines.kgc.config import KGCConfig; import sys; "
             "[print(load_section(s, m, sys.argv[1]).llm.spec_for('x').model) for s, m in "
             "(('tagging', TaggingConfig), ('kgc', KGCConfig), ('ram2c', Ram2cConfig))]")
    out = subprocess.run([sys.executable, "-c", check, str(written)], cwd=project, env=_env(project),
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [MODEL] * 3


@pytest.mark.slow
def test_step_4_sharded_generation_against_a_served_model_then_the_merge(project: Path) -> None:
    port = int((project / ".port").read_text())
    wrong = _shard_task(project, 0, served_as=f"/models/{MODEL}", port=port)  # `vllm serve /models/X` alone
    assert wrong.returncode == 1, wrong.stderr[-3000:]
    assert f"does not serve model '{MODEL}'" in wrong.stderr and f"--served-model-name {MODEL}" in wrong.stderr
    for index in (0, 1):
        done = _shard_task(project, index, served_as=MODEL, port=port)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert (project / f"reports/generate_tagging/shards/{index}-of-2/shard.json").is_file()
        assert (project / f"params.shard-{index}-of-2.yaml").is_file()  # its own LLM cache file
        assert (project / f"data/cache/llm.shard-{index}-of-2.sqlite").is_file()
    merge_command = [sys.executable, "-m", "stages.merge_shards", "--team", "tagging", "--params", "params.yaml"]
    merge = subprocess.run(merge_command, cwd=project, env=_env(project), capture_output=True, text=True, timeout=300)
    assert merge.returncode == 0, merge.stderr[-3000:]
    generated, reports = project / "data/generated/tagging", project / "reports/generate_tagging"
    rows = [json.loads(line) for line in (generated / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["split"] for r in rows) == ["evaluation"] * 2 + ["generation"] * 2  # smoke: 2 + 2 pairs
    assert (generated / "traces.jsonl").stat().st_size > 0 and (generated / "sft.jsonl").exists()
    metrics = json.loads((reports / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["n_evaluated"] == 2
    usage = json.loads((reports / "usage.json").read_text(encoding="utf-8"))
    assert usage["total"]["calls"] > 0  # the calls went to the served model
