"""SFT and DPO runs on the tiny Qwen2 (real Qwen tokenizer): losses fall on a memorisable dataset,
the adapter saves, reloads and merges with identical logits, the final folder carries tokenizer and
model card; bad setups fail with clear errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pipelines.training.families import FamilyError
from pipelines.training.run import TrainingSetupError, build_trainer, run_training
from tests.training.conftest import train_config

pytestmark = pytest.mark.slow


def curve_of(reports: Path, column: str = "loss") -> list[float]:
    with open(reports / "loss.csv", encoding="utf-8") as handle:
        return [float(row[column]) for row in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def sft_run(tiny_model, tiny_data, tmp_path_factory):
    # Full tuning: on a random tiny model LoRA cannot rescale the (frozen, tied) output embedding, so its
    # loss can only fall a little; the full run shows memorisation clearly. LoRA is exercised by DPO below.
    cfg = train_config(
        tiny_model, tiny_data, tmp_path_factory.mktemp("sft") / "run", "sft", tuning="full",
        schedule={"learning_rate": 5e-3},
    )  # fmt: skip
    return cfg, run_training(cfg)


@pytest.fixture(scope="module")
def dpo_run(tiny_model, tiny_data, tmp_path_factory):
    cfg = train_config(tiny_model, tiny_data, tmp_path_factory.mktemp("dpo") / "run", "dpo", merge=True)
    return cfg, run_training(cfg)


def test_sft_loss_falls_over_20_steps(sft_run):
    cfg, metrics = sft_run
    curve = curve_of(cfg.reports_path)
    assert metrics["global_step"] == 20 and len(curve) == 20
    assert metrics["lm_head"]["path"] == "fused" and metrics["lm_head"]["passed"]  # Qwen2: trl's fused head checked
    first, last = sum(curve[:3]) / 3, sum(curve[-3:]) / 3
    assert first > 11.5  # random init over a 151k vocabulary: ~ln(151k) = 11.9
    assert last < first - 3.0, curve
    assert (cfg.reports_path / "loss.png").stat().st_size > 1000


def test_dpo_loss_falls_over_20_steps(dpo_run):
    cfg, metrics = dpo_run
    curve, accuracy = curve_of(cfg.reports_path), curve_of(cfg.reports_path, "accuracy")
    assert metrics["global_step"] == 20 and sum(accuracy[-5:]) / 5 >= 0.8, accuracy  # chosen preferred
    assert abs(curve[0] - 0.6931) < 1e-3  # policy == reference (adapter disabled) at step 0
    assert sum(curve[-3:]) / 3 < 0.55, curve


def logits_of(model, tokenizer):
    import torch

    ids = tokenizer("Why is ice light? What do you already know?", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_adapter_saves_loads_and_merges_with_identical_logits(dpo_run, tiny_model):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg, _ = dpo_run
    assert (cfg.final_dir / "adapter_config.json").exists()
    assert (cfg.final_dir / "adapter_model.safetensors").exists()
    tokenizer = AutoTokenizer.from_pretrained(cfg.final_dir)
    base = logits_of(AutoModelForCausalLM.from_pretrained(tiny_model), tokenizer)
    adapted_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), str(cfg.final_dir))
    adapted = logits_of(adapted_model, tokenizer)
    merged_in_memory = logits_of(adapted_model.merge_and_unload(), tokenizer)
    merged_from_disk = logits_of(AutoModelForCausalLM.from_pretrained(cfg.merged_dir), tokenizer)
    assert not torch.allclose(base, adapted, atol=1e-3)  # training changed the model
    torch.testing.assert_close(adapted, merged_in_memory, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(adapted, merged_from_disk, atol=1e-4, rtol=1e-4)


def test_full_tuning_saves_whole_weights(sft_run):
    from transformers import AutoModelForCausalLM

    cfg, _ = sft_run
    assert (cfg.final_dir / "model.safetensors").exists() and not (cfg.final_dir / "adapter_config.json").exists()
    assert AutoModelForCausalLM.from_pretrained(cfg.final_dir).config.model_type == "qwen2"
    assert "with full tuning" in (cfg.final_dir / "README.md").read_text()


def test_final_folder_has_tokenizer_template_and_model_card(dpo_run, tiny_data, tiny_model):
    from transformers import AutoTokenizer

    cfg, metrics = dpo_run
    saved = AutoTokenizer.from_pretrained(cfg.final_dir)
    assert saved.chat_template == AutoTokenizer.from_pretrained(tiny_model).chat_template
    summary = json.loads((cfg.final_dir / "training_summary.json").read_text())
    card = json.loads((tiny_data / "data_card.json").read_text())
    assert summary["data"]["split_sha256"] == card["sha256"]["dpo"]
    assert summary["base_model"] == str(tiny_model) and summary["params"]["lora"]["r"] == 8
    assert summary["metrics"]["global_step"] == metrics["global_step"] == 20
    readme = (cfg.final_dir / "README.md").read_text()
    assert str(tiny_model) in readme and card["sha256"]["dpo"]["train"] in readme and "dpo with lora tuning" in readme


def test_dpo_on_an_sft_dataset_names_the_missing_columns(tiny_model, tiny_data, tmp_path):
    cfg = train_config(tiny_model, tiny_data, tmp_path, "dpo", dataset=str(tiny_data / "sft"))
    with pytest.raises(TrainingSetupError, match=r"lacks column\(s\) \['chosen', 'rejected'\].*method 'dpo'"):
        build_trainer(cfg)


def test_family_that_does_not_match_the_model_is_refused(tiny_model, tiny_data, tmp_path):
    cfg = train_config(tiny_model, tiny_data, tmp_path, "sft", family="chatglm3")
    with pytest.raises(FamilyError, match="does not match the model"):
        build_trainer(cfg)


def test_missing_dataset_is_a_clear_error(tiny_model, tiny_data, tmp_path):
    cfg = train_config(tiny_model, tiny_data, tmp_path, "sft", dataset=str(tmp_path / "nope"))
    with pytest.raises(TrainingSetupError, match="run the make_datasets stage first"):
        build_trainer(cfg)


def test_qlora_without_gpu_is_a_clear_error(tiny_model, tiny_data, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present; the QLoRA GPU test covers this machine")
    cfg = train_config(tiny_model, tiny_data, tmp_path, "sft", tuning="qlora")
    with pytest.raises(TrainingSetupError, match="qlora needs a CUDA GPU"):
        build_trainer(cfg)


@pytest.mark.gpu
def test_qlora_sft_trains_on_gpu(tiny_model, tiny_data, tmp_path):
    pytest.importorskip("bitsandbytes")
    cfg = train_config(tiny_model, tiny_data, tmp_path, "sft", tuning="qlora", dtype="bfloat16")
    metrics = run_training(cfg)
    assert metrics["global_step"] == 20 and metrics["last_logged_loss"] < metrics["first_logged_loss"]
