"""Whole runs on the remote-code stand-ins: full tuning saves weights that load on their own (with the
remote code) and equal the trained model; a longer run resumes from the checkpoint; a LoRA merge equals
base + adapter. The loss itself is checked against a hand computation in test_lm_head.py."""

from __future__ import annotations

import json

import pytest

from tests.training.conftest import train_config

pytestmark = pytest.mark.slow

IDS = [[5, 17, 40, 41, 42, 60, 61]]


def load(path):
    """As training loads it (the remote class adapted, computed buffers restored)."""
    from pipelines.models.remote_code import load_remote_aware

    return load_remote_aware(path, trust_remote_code=True, dtype="float32").eval()


def logits(model):
    import torch

    with torch.no_grad():
        return model(input_ids=torch.tensor(IDS), use_cache=False).logits


def test_chatglm3_full_tuning_saves_loadable_weights_and_resumes(chatglm3_model, family_data, tmp_path):
    import torch

    from pipelines.training.run import run_training

    schedule = {"max_steps": 2, "save_steps": 1, "save_total_limit": 3, "learning_rate": 5e-3}
    cfg = train_config(chatglm3_model, family_data["chatglm3"], tmp_path / "run", "sft", tuning="full",
                       schedule=schedule)  # fmt: skip
    first = run_training(cfg)
    assert first["global_step"] == 2 and first["lm_head"]["path"] == "own" and first["lm_head"]["passed"]
    final = cfg.final_dir
    assert (final / "modeling_chatglm.py").is_file() and (final / "tokenization_chatglm.py").is_file()
    assert json.loads((final / "config.json").read_text())["auto_map"]["AutoModelForCausalLM"].startswith(
        "modeling_chatglm."
    )
    trained = logits(load(final))
    assert (trained - logits(load(chatglm3_model))).abs().max() > 1e-3  # the weights moved
    assert torch.isfinite(trained).all()
    checkpoint = logits(load(cfg.checkpoints_dir / "checkpoint-2"))
    torch.testing.assert_close(checkpoint, trained)

    longer = train_config(chatglm3_model, family_data["chatglm3"], tmp_path / "run", "sft", tuning="full",
                          schedule=schedule | {"max_steps": 3})  # fmt: skip
    second = run_training(longer)
    assert second["resumed_from_step"] == 2 and second["global_step"] == 3 and second["steps_this_run"] == 1


def test_minicpm_lora_dpo_merges_into_weights_equal_to_base_plus_adapter(minicpm_model, family_data, tmp_path):
    import torch
    from peft import PeftModel

    from pipelines.training.run import run_training

    cfg = train_config(minicpm_model, family_data["minicpm"], tmp_path / "run", "dpo", merge=True,
                       schedule={"max_steps": 3})  # fmt: skip
    metrics = run_training(cfg)
    assert metrics["lm_head"]["path"] == "own" and metrics["last_logged_loss"] < 0.6931
    merged = load(cfg.merged_dir)
    assert merged.lm_head.weight is merged.model.embed_tokens.weight  # still tied after the merge
    adapted = PeftModel.from_pretrained(load(minicpm_model), str(cfg.final_dir)).eval()
    torch.testing.assert_close(logits(merged), logits(adapted), atol=1e-4, rtol=1e-4)
    assert (cfg.merged_dir / "modeling_minicpm.py").is_file()
