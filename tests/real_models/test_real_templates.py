"""Template parity with the real tokenizers (the tokens trained on equal each model's own chat format,
and the last trained token is EOS), and each RAM2C preset's trainer built on the meta device.

Skips unless ``EDUMAS_MODELS_DIR`` holds the real folders (see conftest.py)."""

from __future__ import annotations

import pytest

from pipelines.training.families import chat_token_ids
from tests.real_models.conftest import MESSAGES, RAM2C_MODELS, load_preset, real_model_dir


def ours_and_own(model_dir, *, trust: bool):
    """Our prepared tokenizer (as make_datasets and train load it) and a fresh one, as the model ships it."""
    from transformers import AutoTokenizer

    from pipelines.training.dataset_builder import load_tokenizer

    ours, _ = load_tokenizer(str(model_dir))
    return ours, AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust)


def own_ids(tokenizer, messages, **kwargs) -> list[int]:
    encoded = tokenizer.apply_chat_template(messages, tokenize=True, **kwargs)
    return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


def test_qwen1_5_tokens_equal_its_own_chat_template():
    ours, own = ours_and_own(real_model_dir(RAM2C_MODELS["ram2c_dpo_qwen1.5-4b.yaml"]), trust=False)
    assert chat_token_ids(ours, MESSAGES) == own_ids(own, MESSAGES)
    prompt = chat_token_ids(ours, MESSAGES[:2], add_generation_prompt=True)
    assert prompt == own_ids(own, MESSAGES[:2], add_generation_prompt=True)
    full = chat_token_ids(ours, MESSAGES)
    assert full[: len(prompt)] == prompt
    assert full[-2] == own.convert_tokens_to_ids("<|im_end|>") and ours.decode(full[-1:]) == "\n"
    assert own.convert_tokens_to_ids("<|im_end|>") in {ours.eos_token_id, 151645}


def test_minicpm_tokens_equal_its_own_chat_encoding_plus_eos():
    """MiniCPM's chat() renders its template as text and tokenizes it with the tokenizer's <s>: the tokens
    trained on equal that, plus </s> after the answer."""
    ours, own = ours_and_own(real_model_dir(RAM2C_MODELS["ram2c_dpo_minicpm-2b.yaml"]), trust=True)
    if own.chat_template:
        own_full_text = own.apply_chat_template(MESSAGES, tokenize=False)
        own_prompt_text = own.apply_chat_template(MESSAGES[:2], tokenize=False, add_generation_prompt=True)
    else:  # the documented format <用户>question<AI>answer
        own_prompt_text = "You are a patient tutor.<用户>Why do we have seasons?<AI>"
        own_full_text = own_prompt_text + MESSAGES[2]["content"]
    own_full, own_prompt = own(own_full_text)["input_ids"], own(own_prompt_text)["input_ids"]  # as chat() encodes
    full = chat_token_ids(ours, MESSAGES)
    prompt = chat_token_ids(ours, MESSAGES[:2], add_generation_prompt=True)
    assert prompt == list(own_prompt) and full[: len(prompt)] == prompt
    assert full[0] == ours.bos_token_id == 1  # <s>, which its template does not write
    assert full[-1] == ours.eos_token_id == 2  # </s>: what stops MiniCPM's generation
    assert full[:-1] == list(own_full)


def test_chatglm3_tokens_equal_build_chat_input_and_the_official_recipe():
    ours, own = ours_and_own(real_model_dir(RAM2C_MODELS["ram2c_dpo_chatglm3-6b.yaml"]), trust=True)
    official_prompt = own.build_chat_input(MESSAGES[1]["content"], history=[MESSAGES[0]], role="user")
    official_prompt = list(official_prompt["input_ids"][0])
    official_prompt = [int(t) for t in official_prompt]
    assert chat_token_ids(ours, MESSAGES[:2], add_generation_prompt=True) == official_prompt
    recipe = [own.get_command("[gMASK]"), own.get_command("sop")]  # finetune_demo/finetune_hf.py
    for message in MESSAGES:
        recipe += own.build_single_message(message["role"], "", message["content"])
    recipe.append(own.eos_token_id)
    assert chat_token_ids(ours, MESSAGES) == recipe and recipe[-1] == 2
    # the padding shim: transformers 5 passes padding_side, the remote _pad pads left only
    padded = ours.pad({"input_ids": [[5, 6, 7], [8]]}, padding=True)
    assert [list(row) for row in padded["input_ids"]][1][:2] == [ours.pad_token_id] * 2


@pytest.mark.parametrize("preset", sorted(RAM2C_MODELS))
def test_ram2c_preset_trainer_builds_on_the_meta_device(preset, tmp_path, monkeypatch):
    """Everything up to the first step with the real config, tokenizer and remote code; no weights read."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, Trainer

    from pipelines.training.config import TrainConfig
    from pipelines.training.run import build_trainer

    model_dir = real_model_dir(RAM2C_MODELS[preset])
    real_from_config = AutoModelForCausalLM.from_config

    def on_meta(path, **kwargs):
        config = AutoConfig.from_pretrained(path, trust_remote_code=kwargs.get("trust_remote_code", False))
        extra = {k: kwargs[k] for k in ("attn_implementation",) if k in kwargs}
        with torch.device("meta"):
            model = real_from_config(config, trust_remote_code=kwargs.get("trust_remote_code", False),
                                     dtype=kwargs["dtype"], **extra)  # fmt: skip
        return model

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", on_meta)
    monkeypatch.setattr(Trainer, "_move_model_to_device", lambda self, model, device: None)  # meta stays meta
    cfg = TrainConfig.model_validate(load_preset(preset, model_dir, tmp_path))
    trainer, family, tokenizer = build_trainer(cfg)
    assert len(trainer.train_dataset) > 0
    row = trainer.train_dataset[0]
    assert row["chosen_ids"][-1] in {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")} or (
        tokenizer.decode(row["chosen_ids"][-1:]).strip() == ""
    )
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    assert 0 < trainable < sum(p.numel() for p in trainer.model.parameters())  # LoRA only
