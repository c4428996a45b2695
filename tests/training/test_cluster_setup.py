"""What a first cluster run needs right before the first step: precision of full tuning, the DPO
reference, QLoRA under ZeRO-3, packing, resume across GPU counts, the dataset's tokenizer, the Slurm
defaults, the load order under ZeRO-3, W&B with ``report_to: none`` and the DVC dependencies."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from pipelines.training.config import TrainConfig
from pipelines.training.distributed import PROJECT_ROOT
from tests.training.conftest import train_config


def test_full_tuning_in_bf16_keeps_fp32_master_weights(tiny_model, tiny_data, tmp_path):
    """Outside DeepSpeed, bf16 full tuning loads fp32 weights and trains with bf16 autocast."""
    import torch

    from pipelines.training.run import build_trainer

    cfg = train_config(tiny_model, tiny_data, tmp_path, "sft", tuning="full", dtype="bfloat16")
    trainer, _, _ = build_trainer(cfg)
    dtypes = {p.dtype for p in trainer.model.parameters() if p.requires_grad}
    assert dtypes == {torch.float32}
    assert trainer.args.bf16  # mixed precision: bf16 compute, fp32 weights and optimizer states
    # a 5e-7 step survives in fp32 and is rounded away in bf16
    weight = torch.tensor(0.5)
    assert (weight + 5e-7) != weight and (weight.bfloat16() + 5e-7) == weight.bfloat16()


def test_lora_keeps_the_requested_dtype_for_the_frozen_base(tiny_model, tiny_data):
    from pipelines.training.run import load_dtype

    lora = train_config(tiny_model, tiny_data, Path("x"), "sft", dtype="bfloat16")
    assert load_dtype(lora, deepspeed=False) == "bfloat16"
    full = train_config(tiny_model, tiny_data, Path("x"), "sft", dtype="bfloat16", tuning="full")
    assert load_dtype(full, deepspeed=True) == "bfloat16"  # DeepSpeed holds fp32 masters itself
    assert load_dtype(full, deepspeed=False) == "float32"


def test_full_dpo_with_precomputed_log_probs_loads_no_reference_model(tiny_model, tiny_data, tmp_path):
    """The base named as reference is not loaded: trl would keep a passed reference for the whole run."""
    from pipelines.training.run import build_trainer

    dpo = {"precompute_ref_log_probs": True, "reference_model": str(tiny_model)}
    cfg = train_config(tiny_model, tiny_data, tmp_path, "dpo", tuning="full", dpo=dpo)
    trainer, _, _ = build_trainer(cfg)
    assert trainer.ref_model is None
    assert "ref_chosen_logps" in trainer.train_dataset.column_names  # computed once, before training


def test_the_full_chatglm3_preset_names_no_reference_model():
    preset = yaml.safe_load((PROJECT_ROOT / "configs/training/ram2c_dpo_chatglm3-6b_full.yaml").read_text())
    cfg = TrainConfig.model_validate(preset["train"])
    assert cfg.dpo.precompute_ref_log_probs and cfg.dpo.reference_model is None
    readme = (PROJECT_ROOT / "configs/training/README.md").read_text(encoding="utf-8")
    assert "freed before training" not in readme and "no second model" in readme


def test_qlora_under_zero3_stores_4bit_weights_in_the_compute_dtype(tiny_model, tiny_data):
    import torch

    from pipelines.training.run import qlora_settings

    cfg = train_config(tiny_model, tiny_data, Path("x"), "sft", tuning="qlora", dtype="bfloat16")
    zero3 = qlora_settings(cfg, zero3=True)
    assert zero3["bnb_4bit_quant_storage"] == torch.bfloat16 == zero3["bnb_4bit_compute_dtype"]
    assert "bnb_4bit_quant_storage" not in qlora_settings(cfg, zero3=False)


def test_qlora_under_zero3_keeps_the_storage_dtype_and_upcasts_on_one_gpu(tiny_model):
    """peft's kbit preparation upcasts every non-4-bit weight to fp32; sharded QLoRA (ZeRO-3) keeps one dtype, as
    trl does (``is_sharded_qlora``). A bf16 model stands in for the loaded 4-bit one (no bitsandbytes on CPU)."""
    import torch
    from transformers import AutoModelForCausalLM

    from pipelines.training.loading import prepare_quantized_model

    def bf16_model():
        return AutoModelForCausalLM.from_pretrained(str(tiny_model), dtype=torch.bfloat16)

    sharded = prepare_quantized_model(bf16_model(), False, zero3=True)
    assert {p.dtype for p in sharded.parameters()} == {torch.bfloat16}
    single = prepare_quantized_model(bf16_model(), False, zero3=False)  # peft's own preparation
    assert {p.dtype for p in single.parameters()} == {torch.float32}
    assert not any(p.requires_grad for p in single.parameters())


def test_the_merge_after_a_zero3_run_loads_whole_weights_in_one_process(tiny_model, tmp_path):
    """After training under ZeRO-3 the DeepSpeed config is still registered (the Trainer's arguments hold it);
    the merge on rank 0 alone must not enter zero.Init (a collective the other ranks never join)."""
    pytest.importorskip("deepspeed")
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.integrations import is_deepspeed_zero3_enabled
    from transformers.integrations.deepspeed import HfDeepSpeedConfig, unset_hf_deepspeed_config

    from pipelines.training.run import merge_adapter

    torch.manual_seed(0)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    adapter = tmp_path / "adapter"
    get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny_model)), lora).save_pretrained(adapter)
    AutoTokenizer.from_pretrained(str(tiny_model)).save_pretrained(adapter)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        expected = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_model)), str(adapter))
        expected = expected(input_ids=ids).logits
    held = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    try:
        assert is_deepspeed_zero3_enabled()
        merge_adapter(str(tiny_model), adapter, tmp_path / "merged")
        assert is_deepspeed_zero3_enabled()  # registered again afterwards, for the rest of the run
    finally:
        unset_hf_deepspeed_config()
        del held
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"))
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("attention", ["auto", "sdpa", "eager"])
def test_packing_without_flash_attention_is_refused(tiny_model, tiny_data, attention):
    with pytest.raises(ValueError, match="flash_attention_2"):
        train_config(tiny_model, tiny_data, Path("x"), "sft", sft={"packing": True}, attn_implementation=attention)
    packed = train_config(
        tiny_model, tiny_data, Path("x"), "sft", sft={"packing": True}, attn_implementation="flash_attention_2"
    )
    assert packed.sft.packing


def test_the_data_card_records_the_tokenizer_that_filtered_it(tiny_model, tiny_data):
    from pipelines.models.chat_encoding import tokenizer_fingerprint
    from pipelines.training.families import FAMILIES
    from pipelines.training.run import load_tokenizer

    cfg = train_config(tiny_model, tiny_data, Path("x"), "sft")
    card = json.loads((tiny_data / "data_card.json").read_text())
    fingerprint = tokenizer_fingerprint(load_tokenizer(cfg, FAMILIES["qwen2"], False))
    assert card["targets"]["sft"]["tokenizer_sha256"] == card["targets"]["dpo"]["tokenizer_sha256"] == fingerprint
    assert card["targets"]["sft"] | {"tokenizer_sha256": None} == {
        "section": None, "tokenizer": str(tiny_model), "tokenizer_sha256": None, "family": "qwen2", "max_length": 1024,
    }


def test_a_dataset_filtered_with_another_tokenizer_is_refused(tiny_model, tiny_data, tmp_path):
    from pipelines.training.run import TrainingSetupError, build_trainer

    card = json.loads((tiny_data / "data_card.json").read_text())
    card["targets"]["sft"].update(
        tokenizer="models/base/smollm2-135m-instruct", family="llama", tokenizer_sha256="0" * 64, section="train.sft"
    )
    other_card = tmp_path / "data_card.json"
    other_card.write_text(json.dumps(card))
    cfg = train_config(tiny_model, tiny_data, tmp_path / "run", "sft", data_card=str(other_card))
    refused = r"smollm2-135m-instruct.*built for train\.sft.*set train\.sft\.model: "
    with pytest.raises(TrainingSetupError, match=refused):
        build_trainer(cfg)


def test_answers_cut_by_max_length_are_refused(tiny_model, tiny_data, tmp_path):
    """A row truncated to max_length loses its EOS; the run stops before training on it."""
    from pipelines.training.run import TrainingSetupError, build_trainer

    cfg = train_config(tiny_model, tiny_data, tmp_path, "dpo", max_length=16)
    with pytest.raises(TrainingSetupError, match="do not end with a stop token.*max_length of the train section"):
        build_trainer(cfg)


def test_models_load_after_the_training_arguments_exist(tiny_model, tiny_data, tmp_path, monkeypatch):
    """Under ZeRO-3, from_pretrained must see the DeepSpeed config (zero.Init): it is called only after
    the training arguments registered it (the two-process partition test is test_zero3_init.py)."""
    pytest.importorskip("deepspeed")
    from transformers import AutoModelForCausalLM
    from transformers.integrations import is_deepspeed_zero3_enabled

    from pipelines.training import run

    seen = []

    class Stop(Exception):
        pass

    def record(*args, **kwargs):
        seen.append(is_deepspeed_zero3_enabled())
        raise Stop

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", record)
    zero3 = str(PROJECT_ROOT / "configs/deepspeed/zero3.json")
    with pytest.raises(Stop):
        run.build_trainer(train_config(tiny_model, tiny_data, tmp_path, "dpo", tuning="full", deepspeed=zero3))
    assert seen == [True]


def _default_train_args(script: str) -> str:
    text = (PROJECT_ROOT / "configs/slurm" / script).read_text(encoding="utf-8")
    return re.search(r'TRAIN_ARGS="\$\{TRAIN_ARGS:-(.+?)\}"', text).group(1)


@pytest.mark.parametrize("script", ["train_multinode.sbatch", "launch_node.sh"])
def test_slurm_default_train_args_load_through_stage_setup(script, monkeypatch):
    from pipelines.stage import stage_setup

    monkeypatch.chdir(PROJECT_ROOT)  # the scripts run from the project root
    args, cfg = stage_setup("train", "train", TrainConfig, shlex.split(_default_train_args(script)))
    assert isinstance(cfg, TrainConfig) and cfg.method in ("sft", "dpo")


def test_train_stage_opens_no_wandb_run_with_report_to_none(tiny_model, tiny_data, tmp_path, monkeypatch):
    import stages.train as stage

    opened, trained = [], []
    monkeypatch.setenv("EDUMAS_TRACKING", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(stage, "stage_run", lambda *a, **k: opened.append(a) or pytest.fail("W&B run opened"))
    monkeypatch.setattr(stage, "run_training", lambda cfg, **kw: trained.append(kw["report_to"]) or {"global_step": 1})
    cfg = train_config(tiny_model, tiny_data, tmp_path, "sft")  # tracking.report_to: none
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"train": cfg.model_dump(mode="json")}), encoding="utf-8")
    assert stage.main(["--params", str(params), "--section", "train"]) == 0
    assert opened == [] and trained == ["none"]
    assert json.loads((cfg.reports_path / "metrics.json").read_text()) == {"global_step": 1}


def test_configs_are_a_dependency_of_train():
    stages = yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert "configs" in stages["train"]["do"]["deps"]


def test_presets_use_the_family_attention_default():
    for name in ("ram2c_dpo_chatglm3-6b.yaml", "ram2c_dpo_chatglm3-6b_full.yaml", "ram2c_dpo_minicpm-2b.yaml"):
        preset = yaml.safe_load((PROJECT_ROOT / "configs/training" / name).read_text(encoding="utf-8"))
        assert TrainConfig.model_validate(preset["train"]).attn_implementation == "auto", name
    assert shutil.which("bash")  # the Slurm tests above need it


def test_train_stage_records_the_head_probe_in_metrics_and_wandb_config(tiny_model, tiny_data, tmp_path, monkeypatch):
    from contextlib import contextmanager
    from types import SimpleNamespace

    import stages.train as stage
    from pipelines.tracking import StageRun

    updates, logged = [], []
    run = SimpleNamespace(  # the calls the stage makes on a W&B run
        config=SimpleNamespace(update=lambda values, allow_val_change: updates.append(values)),
        log=logged.append,
        summary={},
    )

    @contextmanager
    def recording_stage_run(*args, **kwargs):
        yield StageRun(run)

    probe = {"path": "fused", "passed": True, "mean_abs_diff": 1e-6, "tokens": 10}
    monkeypatch.setenv("EDUMAS_TRACKING", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(stage, "stage_run", recording_stage_run)
    monkeypatch.setattr(stage, "run_training", lambda cfg, **kw: {"global_step": 1, "lm_head": probe})
    cfg = train_config(tiny_model, tiny_data, tmp_path, "sft", tracking={"report_to": "wandb"})
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"train": cfg.model_dump(mode="json")}), encoding="utf-8")
    assert stage.main(["--params", str(params), "--section", "train"]) == 0
    assert json.loads((cfg.reports_path / "metrics.json").read_text())["lm_head"] == probe
    assert updates == [{"lm_head_probe": probe}]
    assert logged[0]["lm_head/mean_abs_diff"] == 1e-6  # flattened into the run's metrics as well
