"""DeepSpeed ZeRO-2 end to end on CPU: the real ``train`` stage under ``accelerate launch``.

``configs/accelerate/zero2_cpu_ci.yaml`` (one process, gloo through DeepSpeed's CPU accelerator) runs
the shipped ``configs/deepspeed/zero2.json`` with a tiny random Qwen2 and LoRA for a few steps. DeepSpeed's
shared-memory comm op is not compiled (``skip_cpu_shm_comm_op``: gloo reduces on CPU).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("deepspeed")

from pipelines.training.distributed import CONFIGS, PROJECT_ROOT, launch_command  # noqa: E402

MAX_STEPS = 3


@pytest.mark.slow
def test_zero2_trains_tiny_model_on_cpu(tiny_model: Path, tiny_data: Path, tmp_path: Path):
    out = tmp_path / "run"
    params = {
        "train": {
            "method": "sft",
            "model": str(tiny_model),
            "dataset": str(tiny_data / "sft"),
            "data_card": str(tiny_data / "data_card.json"),
            "output_dir": str(out),
            "tuning": "lora",
            "lora": {"r": 8, "alpha": 16, "dropout": 0.0},
            "max_length": 48,
            "dtype": "float32",
            "schedule": {
                "max_steps": MAX_STEPS,
                "learning_rate": 1e-2,
                "lr_scheduler_type": "constant",
                "warmup_ratio": 0.0,
                "per_device_train_batch_size": 1,
                "gradient_accumulation_steps": 2,  # "auto" in zero2.json: DeepSpeed must take it from here
                "save_steps": MAX_STEPS,
            },
            "reports_dir": str(out / "reports"),
            "tracking": {"report_to": "none"},
        }
    }
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    cmd = launch_command(
        CONFIGS / "accelerate" / "zero2_cpu_ci.yaml",
        ["--params", str(params_path), "--section", "train"],
        launcher=(sys.executable, "-m", "accelerate.commands.launch"),
    )
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": "", "EDUMAS_TRACKING": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout[-4000:] + done.stderr[-8000:]
    assert done.returncode == 0, log
    assert "built successfully" not in done.stdout + done.stderr, log  # skip_cpu_shm_comm_op: no JIT build

    metrics = json.loads((out / "reports" / "metrics.json").read_text())
    assert metrics["global_step"] == MAX_STEPS, metrics
    assert math.isfinite(metrics["train_loss"]) and metrics["train_loss"] > 0
    # the LoRA adapter and tokenizer were written as the final model
    final = out / "final"
    assert (final / "adapter_model.safetensors").stat().st_size > 0
    assert (final / "adapter_config.json").is_file() and (final / "tokenizer_config.json").is_file()
    # the checkpoint is a DeepSpeed one: ZeRO-partitioned optimizer states of rank 0, for the last step
    checkpoint = out / "checkpoints" / f"checkpoint-{MAX_STEPS}"
    assert (checkpoint / f"global_step{MAX_STEPS}" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").is_file(), sorted(
        p.name for p in checkpoint.rglob("*")
    )
    # DeepSpeed took micro batch and accumulation from the train params ("auto" in zero2.json)
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state["global_step"] == MAX_STEPS and state["train_batch_size"] == 1
