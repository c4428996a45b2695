"""The first thing to run on a GPU node: each RAM2C preset trains 2 DPO steps with its real model on
one GPU, writes a checkpoint, and a second run resumes from it.

    EDUMAS_MODELS_DIR=/path/to/models pytest -m gpu tests/real_models -x -v

Skips without CUDA (marker ``gpu``) or without the model folders (see conftest.py)."""

from __future__ import annotations

import json

import pytest

from tests.real_models.conftest import RAM2C_MODELS, load_preset, real_model_dir

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

SHORT = {
    "max_steps": 2,
    "save_steps": 2,
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "eval_steps": None,
    "warmup_ratio": 0.0,
}


@pytest.mark.parametrize("preset", sorted(RAM2C_MODELS))
def test_ram2c_preset_trains_two_dpo_steps_checkpoints_and_resumes(preset, tmp_path):
    import torch

    from pipelines.training.config import TrainConfig
    from pipelines.training.run import run_training

    model_dir = real_model_dir(RAM2C_MODELS[preset])
    params = load_preset(preset, model_dir, tmp_path, merge=False)
    params["schedule"] = params["schedule"] | SHORT
    cfg = TrainConfig.model_validate(params)
    torch.cuda.reset_peak_memory_stats()
    first = run_training(cfg)
    assert first["global_step"] == 2 and first["resumed_from_step"] == 0
    assert (cfg.checkpoints_dir / "checkpoint-2" / "trainer_state.json").is_file()
    assert (cfg.final_dir / "adapter_model.safetensors").is_file()
    assert first["train_loss"] == first["train_loss"]  # not NaN
    peak_gb = torch.cuda.max_memory_allocated() / 2**30

    longer = TrainConfig.model_validate(params | {"schedule": params["schedule"] | {"max_steps": 3}})
    second = run_training(longer)
    assert second["resumed_from_step"] == 2 and second["global_step"] == 3 and second["steps_this_run"] == 1
    summary = json.loads((cfg.final_dir / "training_summary.json").read_text())
    assert summary["resumed_from_step"] == 2
    print(f"{preset}: peak GPU memory {peak_gb:.1f} GiB for 2 DPO steps (batch 1, max_length 512)")
