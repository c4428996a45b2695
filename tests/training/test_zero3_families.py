"""ChatGLM3 under DeepSpeed ZeRO-3, end to end on CPU: the real ``train`` stage under ``accelerate launch``
with two gloo processes and the shipped ``configs/deepspeed/zero3.json`` (``zero3_init_flag: true``).

The stand-in keeps ChatGLM3's ``skip_init`` (its default ``empty_init=True``) inside ``deepspeed.zero.Init``
(older DeepSpeed failed there with "Cannot copy out of meta tensor"; 0.19.8 handles ``skip_init`` itself),
its classes without ``post_init`` (which transformers 5 needs), its own head, checked by the parity probe
with the layers gathered by ZeRO-3; and ``merge: true``, which loads the base model again on rank 0 alone
after training (whole weights, outside ``zero.Init``). DeepSpeed's shared-memory comm op is not
compiled (``skip_cpu_shm_comm_op``: gloo reduces on CPU).
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

from pipelines.training.distributed import CONFIGS, PROJECT_ROOT, launch_command  # noqa: E402
from tests.training.test_zero3_init import free_port  # noqa: E402

STEPS = 2


def zero3_two_cpu_processes(tmp_path: Path) -> Path:
    config = yaml.safe_load((CONFIGS / "accelerate" / "zero3_8gpu.yaml").read_text(encoding="utf-8"))
    config["deepspeed_config"]["deepspeed_config_file"] = str(CONFIGS / "deepspeed" / "zero3.json")
    config.update(num_processes=2, main_process_port=free_port())
    path = tmp_path / "zero3_2cpu.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.mark.slow
def test_chatglm3_trains_checks_its_head_and_merges_under_zero3(chatglm3_model, family_data, tmp_path):
    out = tmp_path / "run"
    data = family_data["chatglm3"]
    params = {
        "train": {
            "method": "sft",
            "model": str(chatglm3_model),
            "dataset": str(data / "sft"),
            "data_card": str(data / "data_card.json"),
            "output_dir": str(out),
            "tuning": "lora",
            "lora": {"r": 4, "alpha": 8, "dropout": 0.0},
            "max_length": 48,
            "merge": True,
            "schedule": {"max_steps": STEPS, "learning_rate": 1e-2, "warmup_ratio": 0.0, "save_steps": STEPS,
                         "per_device_train_batch_size": 1},  # fmt: skip
            "reports_dir": str(out / "reports"),
            "tracking": {"report_to": "none"},
        }
    }
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    cmd = launch_command(zero3_two_cpu_processes(tmp_path), ["--params", str(params_path), "--section", "train"],
                         launcher=(sys.executable, "-m", "accelerate.commands.launch"))  # fmt: skip
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": "", "EDUMAS_TRACKING": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout[-3000:] + done.stderr[-6000:]
    assert done.returncode == 0, log

    metrics = json.loads((out / "reports" / "metrics.json").read_text())
    assert metrics["global_step"] == STEPS, metrics
    probe = metrics["lm_head"]  # scored with ZeRO-3 gathering the partitioned layers
    assert probe["path"] == "own" and probe["passed"] and probe["tokens"] > 0
    assert probe["mean_abs_diff"] <= probe["tolerance"]
    checkpoint = out / "checkpoints" / f"checkpoint-{STEPS}"
    assert (checkpoint / f"global_step{STEPS}" / "zero_pp_rank_1_mp_rank_00_optim_states.pt").is_file()  # 2 ranks

    import torch
    from peft import PeftModel

    from pipelines.models.remote_code import load_remote_aware

    # the merged folder holds whole weights equal to base + adapter, computed here in one process
    assert (out / "merged" / "modeling_chatglm.py").is_file()  # loadable on its own, with its remote code

    def load(path):
        return load_remote_aware(path, trust_remote_code=True, dtype="float32").eval()

    ids = torch.tensor([[5, 17, 40, 41, 42, 60]])
    with torch.no_grad():
        adapted = PeftModel.from_pretrained(load(chatglm3_model), str(out / "final"))(input_ids=ids).logits
        merged = load(out / "merged")(input_ids=ids).logits
        base = load(chatglm3_model)(input_ids=ids).logits
    torch.testing.assert_close(merged, adapted, atol=1e-4, rtol=1e-4)
    assert (merged - base).abs().max() > 1e-3  # the adapter trained: merging changed the weights
