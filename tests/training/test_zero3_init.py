"""DeepSpeed ZeRO-3 partitions the weights while loading: two gloo processes on CPU under
``accelerate launch`` with the shipped ``configs/deepspeed/zero3.json`` (``zero3_init_flag: true``).

``build_trainer`` creates the training arguments (which register the DeepSpeed config with
transformers) before ``from_pretrained``, so the model is built inside ``deepspeed.zero.Init`` and each
rank holds half of every parameter. The rank script also loads once in the old order (model first):
that copy is whole on every rank. DeepSpeed's shared-memory comm op is not compiled
(``skip_cpu_shm_comm_op``: gloo reduces on CPU).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("deepspeed")

from pipelines.training.distributed import CONFIGS, PROJECT_ROOT, launch_command  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

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
before = load_model(cfg.model, cfg, False, tokenizer, family=family)  # the old order: no args yet
whole_before = not any(hasattr(p, "ds_id") for p in before.parameters()) and sum(p.numel() for p in before.parameters())
args = trainer_args(cfg, report_to="none", run_name=None)
deepspeed, zero3 = deepspeed_state(args)
model = load_model(cfg.model, cfg, False, tokenizer, family=family, deepspeed=deepspeed, zero3=zero3)
params = list(model.parameters())
result = json.dumps({
    "rank": int(os.environ["RANK"]),
    "zero3": zero3,
    "whole_when_loaded_first": whole_before,
    "all_partitioned": all(hasattr(p, "ds_id") for p in params),
    "local_numel": sum(p.numel() for p in params),
    "full_numel": sum(int(getattr(p, "ds_numel", 0)) for p in params),
    "shard_numel": sum(p.ds_tensor.numel() for p in params if hasattr(p, "ds_tensor")),
})
with open(os.path.join(sys.argv[2], "rank%s.json" % os.environ["RANK"]), "w") as handle:  # one file per rank
    handle.write(result)
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
            "schedule": {"max_steps": 1, "per_device_train_batch_size": 1},
            "tracking": {"report_to": "none"},
        }
    }
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT, encoding="utf-8")
    accelerate_config = yaml.safe_load((CONFIGS / "accelerate" / "zero3_8gpu.yaml").read_text(encoding="utf-8"))
    accelerate_config["deepspeed_config"]["deepspeed_config_file"] = str(CONFIGS / "deepspeed" / "zero3.json")
    accelerate_config.update(num_processes=2, main_process_port=free_port())
    accelerate_path = tmp_path / "zero3_2cpu.yaml"
    accelerate_path.write_text(yaml.safe_dump(accelerate_config), encoding="utf-8")
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": "", "EDUMAS_TRACKING": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    cmd = launch_command(accelerate_path, [str(script), str(params_path), str(tmp_path)], module=None,
                         launcher=(sys.executable, "-m", "accelerate.commands.launch"))  # fmt: skip
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout[-3000:] + done.stderr[-6000:]
    assert done.returncode == 0, log
    results = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["rank"] for r in results] == [0, 1], log
    for result in results:
        assert result["whole_when_loaded_first"] > 0, result  # the defect: loading before the args
        assert result["zero3"] and result["all_partitioned"], result
        # zero.Init replaces every local tensor by an empty placeholder; the rank's shard holds ~half
        assert result["local_numel"] == 0, result
        assert result["full_numel"] > 0
        assert result["shard_numel"] <= result["full_numel"] // 2 + 4096, result
    assert results[0]["full_numel"] == results[1]["full_numel"] == results[0]["whole_when_loaded_first"]
    assert sum(r["shard_numel"] for r in results) >= results[0]["full_numel"]
