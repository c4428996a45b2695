"""DeepSpeed ZeRO-3 partitions the weights while loading: two gloo processes on CPU.

``build_trainer`` creates the training arguments (which register the DeepSpeed config with
transformers) before ``from_pretrained``, so the model is built inside ``deepspeed.zero.Init`` and each
rank holds half of every parameter. The first DeepSpeed run in a fresh environment compiles a CPU
comm op (2-3 min on 2 cores, cached in ``~/.cache/torch_extensions``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("deepspeed")

from pipelines.training.distributed import CONFIGS, PROJECT_ROOT  # noqa: E402

# Runs on each rank: the product's own order (tokenizer, training arguments, then the model).
RANK_SCRIPT = """
import json, os, sys
from pipelines.config import load_section
from pipelines.training.config import TrainConfig
from pipelines.training.families import detect_family, read_model_type
from pipelines.training.run import deepspeed_state, load_model, load_tokenizer, trainer_args

cfg = load_section("train", TrainConfig, sys.argv[1])
family = detect_family(read_model_type(cfg.model))
tokenizer = load_tokenizer(cfg, family, False)
args = trainer_args(cfg, report_to="none", run_name=None)
deepspeed, zero3 = deepspeed_state(args)
model = load_model(cfg.model, cfg, False, tokenizer, family=family, deepspeed=deepspeed, zero3=zero3)
params = list(model.parameters())
print("RESULT " + json.dumps({
    "rank": int(os.environ["RANK"]),
    "zero3": zero3,
    "all_partitioned": all(hasattr(p, "ds_id") for p in params),
    "local_numel": sum(p.numel() for p in params),
    "full_numel": sum(int(getattr(p, "ds_numel", 0)) for p in params),
    "shard_numel": sum(p.ds_tensor.numel() for p in params if hasattr(p, "ds_tensor")),
}), flush=True)
"""


@pytest.mark.slow
def test_zero3_partitions_parameters_while_loading(tiny_model: Path, tiny_data: Path, tmp_path: Path):
    params = {
        "train": {
            "method": "sft",
            "model": str(tiny_model),
            "dataset": str(tiny_data / "sft"),
            "data_card": str(tiny_data / "data_card.json"),
            "output_dir": str(tmp_path / "run"),
            "tuning": "full",
            "max_length": 48,
            "deepspeed": str(CONFIGS / "deepspeed" / "zero3.json"),
            "schedule": {"max_steps": 1, "per_device_train_batch_size": 1},
            "tracking": {"report_to": "none"},
        }
    }
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT, encoding="utf-8")
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": "", "EDUMAS_TRACKING": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "0",
           str(script), str(params_path)]  # fmt: skip
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout[-3000:] + done.stderr[-6000:]
    assert done.returncode == 0, log
    results = sorted(
        (json.loads(line.split("RESULT ", 1)[1]) for line in done.stdout.splitlines() if "RESULT " in line),
        key=lambda r: r["rank"],
    )
    assert [r["rank"] for r in results] == [0, 1], log
    for result in results:
        assert result["zero3"] and result["all_partitioned"], result
        # zero.Init replaces every local tensor by an empty placeholder; the rank's shard holds ~half
        assert result["local_numel"] == 0, result
        assert result["full_numel"] > 0
        assert result["shard_numel"] <= result["full_numel"] // 2 + 4096, result
    assert results[0]["full_numel"] == results[1]["full_numel"]
    assert sum(r["shard_numel"] for r in results) >= results[0]["full_numel"]
