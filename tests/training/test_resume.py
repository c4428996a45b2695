"""A training run killed after a checkpoint continues from that checkpoint's step, not from 0,
when started again through the DVC stage entry point (``python -m stages.train``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.training.conftest import train_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# The first run is slowed down by a callback (test code, not product code) so the kill lands mid-run.
SLOW_RUN = """
import sys, time
from transformers import TrainerCallback
from pipelines.config import load_section
from pipelines.training.config import TrainConfig
from pipelines.training.run import run_training

class SlowDown(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(1.0)

run_training(load_section("train", TrainConfig, sys.argv[1]), callbacks=[SlowDown()])
"""


def complete_steps(checkpoints: Path) -> list[int]:
    return sorted(
        int(p.name.split("-")[1]) for p in checkpoints.glob("checkpoint-*") if (p / "trainer_state.json").exists()
    )


def test_killed_run_resumes_from_its_last_checkpoint(tiny_model, tiny_data, tmp_path):
    cfg = train_config(
        tiny_model,
        tiny_data,
        tmp_path / "run",
        "sft",
        schedule={"max_steps": 6, "save_steps": 2, "save_total_limit": 5},
    )
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"train": cfg.model_dump(mode="json")}), encoding="utf-8")
    env = os.environ | {"PYTHONPATH": str(ROOT), "EDUMAS_TRACKING": "0"}

    first = subprocess.Popen([sys.executable, "-c", SLOW_RUN, str(params)], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 240
    while not complete_steps(cfg.checkpoints_dir) and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    steps_before = complete_steps(cfg.checkpoints_dir)
    assert steps_before and steps_before[-1] < 6, f"the first run should be killed mid-way, found {steps_before}"
    assert not cfg.final_dir.exists()

    second = subprocess.run(
        [sys.executable, "-m", "stages.train", "--params", str(params), "--section", "train"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr[-3000:]
    metrics = json.loads((cfg.reports_path / "metrics.json").read_text())
    assert metrics["resumed_from_step"] == steps_before[-1] > 0
    assert metrics["global_step"] == 6 and metrics["steps_this_run"] == 6 - steps_before[-1]
    assert f"resuming from {cfg.checkpoints_dir / f'checkpoint-{steps_before[-1]}'}" in second.stderr
    state = json.loads((cfg.checkpoints_dir / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    assert json.loads((cfg.final_dir / "training_summary.json").read_text())["resumed_from_step"] == steps_before[-1]
