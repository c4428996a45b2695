"""The chat encoder: ChatGLM3 ids built from ids, EOS at the end of every trained answer, BOS first for
MiniCPM-2B as its chat() encodes, remote-code shims (``is_torch_fx_available``, ChatGLM3's left-only
``_pad``) and the family attention default."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.models.chat_encoding import (
    ChatEncodingError,
    install_remote_code_shims,
    patch_left_only_pad,
    tokenizer_fingerprint,
)
from pipelines.training.families import (
    FAMILIES,
    FamilyError,
    attention_implementation,
    chat_token_ids,
    model_stop_ids,
    prepare_tokenizer,
)
from tests.standins import MINICPM_OWN_TEMPLATE

MESSAGES = [
    {"role": "system", "content": "Be kind."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
]
def test_minicpm_rows_start_with_bos_and_end_with_eos_as_its_own_chat_code_has_them(minicpm_model):
    """MiniCPM-2B's own template writes neither: its ``chat()`` tokenizes the rendered text with the tokenizer's
    ``<s>`` (``tokenizer(text)``), and it must learn to stop with ``</s>``. The encoded row equals that, plus EOS."""
    from transformers import AutoTokenizer

    own = AutoTokenizer.from_pretrained(str(minicpm_model))  # as the model ships it (LlamaTokenizer, add_bos_token)
    assert own.chat_template == MINICPM_OWN_TEMPLATE
    template_ids = own.apply_chat_template(MESSAGES[1:], tokenize=True, return_dict=True)["input_ids"]
    assert template_ids[0] != own.bos_token_id and template_ids[-1] != own.eos_token_id
    ours = prepare_tokenizer(AutoTokenizer.from_pretrained(str(minicpm_model)), FAMILIES["minicpm"])
    assert ours.chat_template == MINICPM_OWN_TEMPLATE  # its own template is kept
    prompt = chat_token_ids(ours, MESSAGES[1:2], add_generation_prompt=True)
    chat_prompt = own(own.apply_chat_template(MESSAGES[1:2], tokenize=False, add_generation_prompt=True))["input_ids"]
    assert prompt == list(chat_prompt) and prompt[0] == own.bos_token_id == 1  # what MiniCPM's chat() encodes
    full = chat_token_ids(ours, MESSAGES[1:])
    chat_full = own(own.apply_chat_template(MESSAGES[1:], tokenize=False))["input_ids"]
    assert full == list(chat_full) + [own.eos_token_id] == [own.bos_token_id] + list(template_ids) + [2]
    assert full[: len(prompt)] == prompt  # trl's prompt/completion split holds


def test_a_template_that_writes_the_stop_token_is_left_as_it_is(qwen_tokenizer):
    tokenizer = qwen_tokenizer
    own = tokenizer.apply_chat_template(MESSAGES, tokenize=True, return_dict=True)["input_ids"]
    prepare_tokenizer(tokenizer, FAMILIES["qwen2"])
    ids = chat_token_ids(tokenizer, MESSAGES)
    assert ids == list(own)
    assert tokenizer.decode(ids[-2:]) == "<|im_end|>\n"  # the stop token, then the template's newline


def test_model_stop_ids_read_config_and_generation_config(tmp_path: Path):
    (tmp_path / "config.json").write_text('{"eos_token_id": 2}')
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [2, 73440]}')
    assert model_stop_ids(tmp_path) == (2, 73440)
    assert model_stop_ids(tmp_path / "missing") == ()


def _official_chatglm3(tokenizer, command: dict[str, int]):
    """A ChatGLM3-like tokenizer over the Qwen vocabulary: get_command / build_single_message as in the
    remote tokenization_chatglm.py (role token by id, then sentencepiece-style encodings of
    "\\n" and the text), and the official build_chat_input / fine-tuning ids to compare with."""

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def get_command(token: str) -> int:
        return command[token]

    def build_single_message(role, metadata, message):
        return [command[f"<|{role}|>"]] + encode(f"{metadata}\n") + encode(message)

    def build_chat_input(query, history, role="user"):  # remote code, 2024 revision
        ids = []
        for item in history:
            ids += build_single_message(item["role"], "", item["content"])
        ids += build_single_message(role, "", query) + [command["<|assistant|>"]]
        return [command["[gMASK]"], command["sop"]] + ids

    def finetune_ids(conversation):  # finetune_demo/finetune_hf.py process_batch
        ids = [command["[gMASK]"], command["sop"]]
        for message in conversation:
            ids += build_single_message(message["role"], "", message["content"])
        return ids + [tokenizer.eos_token_id]

    return get_command, build_single_message, build_chat_input, finetune_ids


def test_chatglm3_ids_are_built_from_ids_like_the_official_code(qwen_tokenizer, monkeypatch):
    tokenizer = qwen_tokenizer
    vocab = tokenizer.get_vocab()
    names = ["[gMASK]", "sop", "<|system|>", "<|user|>", "<|assistant|>"]
    stand_ins = ["<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|object_ref_start|>"]
    command = {name: vocab[stand_in] for name, stand_in in zip(names, stand_ins, strict=True)}
    get_command, build_single_message, build_chat_input, finetune_ids = _official_chatglm3(tokenizer, command)
    monkeypatch.setattr(tokenizer, "get_command", get_command, raising=False)
    monkeypatch.setattr(tokenizer, "build_single_message", build_single_message, raising=False)
    prepare_tokenizer(tokenizer, FAMILIES["chatglm3"])

    prompt = chat_token_ids(tokenizer, MESSAGES[:2], add_generation_prompt=True)
    assert prompt == build_chat_input("Hi", [MESSAGES[0]])
    conversation = chat_token_ids(tokenizer, MESSAGES)
    assert conversation == finetune_ids(MESSAGES) and conversation[-1] == tokenizer.eos_token_id
    assert conversation[: len(prompt)] == prompt  # trl's prompt/completion split lands after <|assistant|>
    # tokenizing the rendered text instead would not give the special ids (the defect this fixes)
    text_ids = tokenizer.encode(tokenizer.apply_chat_template(MESSAGES, tokenize=False), add_special_tokens=False)
    assert command["[gMASK]"] not in text_ids and text_ids != conversation
    assert tokenizer.padding_side == "left"  # the remote _pad supports nothing else


def test_chatglm3_encoder_names_the_fix_for_a_tokenizer_without_the_remote_methods(qwen_tokenizer):
    prepare_tokenizer(qwen_tokenizer, FAMILIES["chatglm3"])
    with pytest.raises(ChatEncodingError, match="build_single_message|get_command"):
        chat_token_ids(qwen_tokenizer, MESSAGES)


class LegacyPadTokenizer:
    """The 2023 ChatGLM3 ``_pad`` signature: no ``padding_side``, asserts left padding."""

    padding_side = "left"
    pad_token_id = 0

    def _pad(self, encoded_inputs, max_length=None, padding_strategy="longest", pad_to_multiple_of=None,
             return_attention_mask=None):  # fmt: skip
        assert self.padding_side == "left"
        difference = (max_length or 0) - len(encoded_inputs["input_ids"])
        encoded_inputs["input_ids"] = [self.pad_token_id] * difference + encoded_inputs["input_ids"]
        return encoded_inputs


def test_the_legacy_pad_accepts_padding_side_and_refuses_right_padding_clearly():
    tokenizer = LegacyPadTokenizer()
    with pytest.raises(TypeError):  # what transformers 5 does to the unpatched remote code
        tokenizer._pad({"input_ids": [5]}, max_length=3, padding_side="left")
    patch_left_only_pad(tokenizer)
    assert tokenizer._pad({"input_ids": [5]}, max_length=3, padding_side="left")["input_ids"] == [0, 0, 5]
    with pytest.raises(ChatEncodingError, match="pads on the left only"):
        tokenizer._pad({"input_ids": [5]}, max_length=3, padding_side="right")


def test_is_torch_fx_available_is_restored_for_remote_code(monkeypatch):
    import transformers.utils.import_utils as import_utils

    monkeypatch.delattr(import_utils, "is_torch_fx_available", raising=False)
    with pytest.raises(ImportError):
        exec("from transformers.utils.import_utils import is_torch_fx_available", {})
    install_remote_code_shims()
    namespace: dict = {}
    exec("from transformers.utils.import_utils import is_torch_fx_available", namespace)
    assert namespace["is_torch_fx_available"]() is False


def test_attention_default_per_family():
    assert attention_implementation("auto", FAMILIES["qwen2"]) == "sdpa"
    assert attention_implementation("auto", FAMILIES["chatglm3"]) is None  # nothing passed to from_pretrained
    assert attention_implementation("auto", FAMILIES["minicpm"]) is None
    assert attention_implementation("flash_attention_2", FAMILIES["llama"]) == "flash_attention_2"
    with pytest.raises(FamilyError, match="not supported by family 'chatglm3'.*attn_implementation: auto"):
        attention_implementation("sdpa", FAMILIES["chatglm3"])


def test_the_fingerprint_tells_tokenizers_apart(qwen_tokenizer):
    prepare_tokenizer(qwen_tokenizer, FAMILIES["qwen2"])
    qwen = tokenizer_fingerprint(qwen_tokenizer)
    assert qwen == tokenizer_fingerprint(qwen_tokenizer)
    qwen_tokenizer.chat_template = MINICPM_OWN_TEMPLATE
    prepare_tokenizer(qwen_tokenizer, FAMILIES["qwen2"])  # same vocabulary, other chat format
    assert tokenizer_fingerprint(qwen_tokenizer) != qwen


@pytest.fixture(scope="module")
def tiny_model_without_eos(tmp_path_factory, tiny_model) -> Path:
    """The tiny Qwen2 whose tokenizer's own chat template writes no stop token after the answer."""
    import json

    folder = tmp_path_factory.mktemp("no_eos") / "model"
    shutil.copytree(tiny_model, folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["chat_template"] = MINICPM_OWN_TEMPLATE
    config_path.write_text(json.dumps(config), encoding="utf-8")
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


def test_the_last_trained_token_is_eos_with_an_own_template_without_eos(tiny_model_without_eos, tmp_path):
    """Through trl itself: SFT's last label and DPO's chosen/rejected ids end with the EOS id."""
    from pipelines.training.dataset_builder import MakeDatasetsConfig, build_datasets
    from pipelines.training.dataset_targets import model_targets
    from pipelines.training.run import build_trainer
    from tests.training.conftest import DPO_ROWS, SFT_ROWS, train_config, write_jsonl

    data = tmp_path / "data"
    build_datasets(
        MakeDatasetsConfig(
            inputs=[
                {"path": str(write_jsonl(tmp_path / "in" / "sft.jsonl", SFT_ROWS)), "kind": "sft"},
                {"path": str(write_jsonl(tmp_path / "in" / "dpo.jsonl", DPO_ROWS)), "kind": "dpo"},
            ],
            output_dir=str(data),
            eval_fraction=0.0,
            reports_dir=str(tmp_path / "reports"),
        ),
        model_targets(str(tiny_model_without_eos)),
    )
    trainer, _, tokenizer = build_trainer(train_config(tiny_model_without_eos, data, tmp_path / "sft", "sft"))
    eos = tokenizer.eos_token_id
    assert tokenizer.chat_template == MINICPM_OWN_TEMPLATE
    for row in trainer.train_dataset:
        trained = [t for t in row["labels"] if t != -100] if "labels" in row else [
            t for t, keep in zip(row["input_ids"], row["completion_mask"], strict=True) if keep
        ]
        assert trained[-1] == eos, tokenizer.decode(trained)
    trainer, _, _ = build_trainer(train_config(tiny_model_without_eos, data, tmp_path / "dpo", "dpo"))
    for row in trainer.train_dataset:
        assert row["chosen_ids"][-1] == eos and row["rejected_ids"][-1] == eos
