"""Model families: detection, exact chat formats (ChatGLM3, MiniCPM), prompt/conversation prefix
property, pad tokens; and template parity between trl's training tokens and the real Qwen tokenizer."""

from __future__ import annotations

import pytest

from pipelines.training.families import (
    FAMILIES,
    FamilyError,
    chat_token_ids,
    detect_family,
    prepare_tokenizer,
    render_conversation,
    render_prompt,
)

MESSAGES = [
    {"role": "system", "content": "Be kind."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
]


def fixture_tokenizer(tokenizer, family: str):
    """The real Qwen tokenizer's vocabulary carrying ``family``'s chat format (string-level tests)."""
    if family != "qwen2":
        tokenizer.chat_template = None
    return prepare_tokenizer(tokenizer, FAMILIES[family])


@pytest.mark.parametrize(
    ("model_type", "family"),
    [("qwen2", "qwen2"), ("qwen3", "qwen2"), ("llama", "llama"), ("minicpm", "minicpm"), ("chatglm", "chatglm3")],
)
def test_detect_family_from_model_type(model_type, family):
    assert detect_family(model_type).name == family


def test_family_override_must_match_the_model():
    assert detect_family("chatglm", "chatglm3").name == "chatglm3"
    with pytest.raises(FamilyError, match="does not match the model"):
        detect_family("qwen2", "chatglm3")
    with pytest.raises(FamilyError, match="unknown family 'gpt5'"):
        detect_family("qwen2", "gpt5")
    with pytest.raises(FamilyError, match="'bert' is not a supported causal chat model"):
        detect_family("bert")


def test_family_settings():
    assert FAMILIES["chatglm3"].lora_targets == ("query_key_value",)
    assert FAMILIES["chatglm3"].trust_remote_code and FAMILIES["minicpm"].trust_remote_code
    assert not FAMILIES["qwen2"].trust_remote_code
    assert "q_proj" in FAMILIES["qwen2"].lora_targets and "down_proj" in FAMILIES["llama"].lora_targets


def test_chatglm3_template_renders_the_official_format(qwen_tokenizer):
    tokenizer = fixture_tokenizer(qwen_tokenizer, "chatglm3")
    eos = tokenizer.eos_token
    assert (
        render_conversation(tokenizer, MESSAGES)
        == f"[gMASK]sop<|system|>\n Be kind.<|user|>\n Hi<|assistant|>\n Hello!{eos}"
    )
    assert render_prompt(tokenizer, MESSAGES[:2]) == "[gMASK]sop<|system|>\n Be kind.<|user|>\n Hi<|assistant|>"
    two_turns = MESSAGES + [{"role": "user", "content": "Again"}]
    assert render_prompt(tokenizer, two_turns) == (
        "[gMASK]sop<|system|>\n Be kind.<|user|>\n Hi<|assistant|>\n Hello!<|user|>\n Again<|assistant|>"
    )


def test_chatglm3_template_overrides_a_custom_tokenizer_template(qwen_tokenizer):
    tokenizer = qwen_tokenizer  # has its own (ChatML) template, which ChatGLM3 must not use
    prepare_tokenizer(tokenizer, FAMILIES["chatglm3"])
    assert render_prompt(tokenizer, MESSAGES[1:2]) == "[gMASK]sop<|user|>\n Hi<|assistant|>"


def minicpm_tokenizer(minicpm_model, *, own_template: bool = True):
    """The MiniCPM stand-in's LlamaTokenizer (it has MiniCPM's BOS), with or without its own template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(minicpm_model))
    if not own_template:
        tokenizer.chat_template = None
    return prepare_tokenizer(tokenizer, FAMILIES["minicpm"])


def test_minicpm_fallback_template(minicpm_model):
    tokenizer = minicpm_tokenizer(minicpm_model, own_template=False)
    assert render_conversation(tokenizer, MESSAGES) == f"Be kind.<用户>Hi<AI>Hello!{tokenizer.eos_token}"
    assert render_prompt(tokenizer, MESSAGES[1:2]) == "<用户>Hi<AI>"


def test_minicpm_keeps_its_own_template_when_present(minicpm_model):
    from tests.standins import MINICPM_OWN_TEMPLATE

    assert minicpm_tokenizer(minicpm_model).chat_template == MINICPM_OWN_TEMPLATE


@pytest.mark.parametrize("family", ["qwen2", "chatglm3", "minicpm"])
def test_generation_prompt_is_a_prefix_of_the_trained_conversation(family, qwen_tokenizer, minicpm_model):
    if family == "minicpm":
        tokenizer = minicpm_tokenizer(minicpm_model, own_template=False)
    else:
        tokenizer = fixture_tokenizer(qwen_tokenizer, family)
    prompt = render_prompt(tokenizer, MESSAGES[:2])
    assert render_conversation(tokenizer, MESSAGES).startswith(prompt)
    if family == "minicpm":  # on ids too, with the BOS its chat code starts with
        prompt_ids = chat_token_ids(tokenizer, MESSAGES[:2], add_generation_prompt=True)
        assert chat_token_ids(tokenizer, MESSAGES)[: len(prompt_ids)] == prompt_ids
        assert prompt_ids[0] == tokenizer.bos_token_id


def test_own_policy_without_template_is_an_error(qwen_tokenizer):
    tokenizer = qwen_tokenizer
    tokenizer.chat_template = None
    with pytest.raises(FamilyError, match="no chat template"):
        prepare_tokenizer(tokenizer, FAMILIES["qwen2"])


def test_pad_token_and_padding_side(qwen_tokenizer):
    tokenizer = qwen_tokenizer
    tokenizer.pad_token = None
    tokenizer.padding_side = "left"
    prepare_tokenizer(tokenizer, FAMILIES["qwen2"])
    assert tokenizer.pad_token == "<|endoftext|>" and tokenizer.padding_side == "right"
    prepare_tokenizer(tokenizer, FAMILIES["qwen2"], padding_side="left")
    assert tokenizer.padding_side == "left"


def test_sft_tokens_equal_the_real_qwen_chat_template(tiny_model, tiny_data, tmp_path, qwen_tokenizer):
    """What SFTTrainer trains on is exactly apply_chat_template of the real Qwen tokenizer, the loss
    covers only the assistant completion, and the evaluation prompt renders the same prefix."""
    from pipelines.training.run import build_trainer
    from tests.training.conftest import SFT_ROWS, train_config

    trainer, _, tokenizer = build_trainer(train_config(tiny_model, tiny_data, tmp_path, "sft"))
    real = qwen_tokenizer
    by_prompt = {row["messages"][-2]["content"]: row["messages"] for row in SFT_ROWS}
    assert len(trainer.train_dataset) == len(SFT_ROWS)
    for example in trainer.train_dataset:
        text = tokenizer.decode(example["input_ids"])
        messages = next(m for q, m in by_prompt.items() if f"\n{q}<|im_end|>" in text)
        assert example["input_ids"] == chat_token_ids(real, messages)
        trained = [t for t, label in zip(example["input_ids"], example["labels"], strict=True) if label != -100]
        assert tokenizer.decode(trained).endswith(messages[-1]["content"] + "<|im_end|>\n")
        prompt_len = example["labels"].index(next(label for label in example["labels"] if label != -100))
        eval_prompt = real(render_prompt(real, messages[:-1]), add_special_tokens=False)["input_ids"]
        assert example["input_ids"][:prompt_len] == eval_prompt


def test_dpo_tokens_equal_the_real_qwen_chat_template(tiny_model, tiny_data, tmp_path, qwen_tokenizer):
    from pipelines.training.run import build_trainer
    from tests.training.conftest import DPO_ROWS, train_config

    trainer, _, _ = build_trainer(train_config(tiny_model, tiny_data, tmp_path, "dpo"))
    real = qwen_tokenizer
    rows = {real.decode(chat_token_ids(real, r["prompt"], add_generation_prompt=True)): r for r in DPO_ROWS}
    assert len(trainer.train_dataset) == len(DPO_ROWS)
    for example in trainer.train_dataset:
        row = rows[real.decode(example["prompt_ids"])]
        for side in ("chosen", "rejected"):
            assert example["prompt_ids"] + example[f"{side}_ids"] == chat_token_ids(real, row["prompt"] + row[side])
