"""Tiny random stand-ins for the model families edumas fine-tunes, built offline (no hub weights).

Each builder writes a model folder the way the real one ships: ``config.json`` with ``auto_map``, the
remote-code files (``configuration_*.py``, ``modeling_*.py``, for ChatGLM3 ``tokenization_chatglm.py``)
and a sentencepiece ``tokenizer.model`` trained here on a few sentences (byte fallback, so any text
encodes), so ``AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True)`` takes the real
loading path. The remote code in ``tests/standins/<family>/`` is written for these tests; what it keeps of
the real code is listed in each file's docstring. Qwen2 needs no stand-in: ``tests.tiny_models.tiny_qwen2``
builds the native transformers class on the real Qwen tokenizer.

- ``tiny_chatglm3(path)``: ChatGLM3-6B's structure (no ``lm_head``, ``transformer.output_layer``,
  sequence-first hidden states, ``skip_init`` unless ``empty_init=False``, ChatGLMTokenizer).
- ``tiny_minicpm(path)``: MiniCPM-2B's structure (width-scaled head, ``scale_emb``, tied embeddings
  declared as a list), on a LlamaTokenizer with ``<用户>``/``<AI>`` and MiniCPM's own chat template.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

HERE = Path(__file__).parent

CORPUS = [
    "Capital of France? Paris is the capital.",
    "2 plus 2? It is four.",
    "Sky colour? Blue, usually.",
    "Why is ice light? What do you already know?",
    "Help with fractions? What is a verb? Go away now.",
    "You are a patient tutor. Why do we have seasons? The angle of sunlight changes over a year.",
    "为什么冰比水轻？你已经知道什么？我们一起想一想。",
    "老师：请解释分数。学生：二分之一就是一半。",
]
# MiniCPM-2B-sft's own template (tokenizer_config.json): no BOS, no EOS; its chat() tokenizes the text with BOS.
MINICPM_OWN_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}{{'<用户>' + message['content'].strip() + "
    "'<AI>'}}{% else %}{{message['content'].strip()}}{% endif %}{% endfor %}"
)


def train_sentencepiece(dest: Path, *, vocab_size: int = 400, user_symbols: tuple[str, ...] = ()) -> Path:
    """A small BPE sentencepiece model (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, byte fallback) at ``dest``."""
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 4),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type="bpe",
        byte_fallback=True,
        hard_vocab_limit=False,
        character_coverage=1.0,
        user_defined_symbols=list(user_symbols),
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    dest.write_bytes(buffer.getvalue())
    return dest


def _remote_module(family: str, name: str):
    """Import a stand-in remote-code file as a package module (its relative imports need the package)."""
    import importlib

    return importlib.import_module(f"tests.standins.{family}.{name}")


def _write_remote_folder(model, path: Path, family: str, files: list[str], auto_map: dict[str, str]) -> None:
    model.save_pretrained(path)
    for name in files:
        shutil.copy(HERE / family / name, path / name)
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    config["auto_map"] = auto_map
    (path / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


def _init_random(model, *, seed: int, std: float) -> None:
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * std)


def tiny_chatglm3(path: Path | str, *, seed: int = 0, layers: int = 2, hidden: int = 64, std: float = 0.1) -> Path:
    """A random ChatGLM3-structured model with its remote code and a ChatGLMTokenizer; returns ``path``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    sp_path = train_sentencepiece(path / "tokenizer.model")
    tokenization = _remote_module("chatglm3", "tokenization_chatglm")
    tokenizer = tokenization.ChatGLMTokenizer(str(sp_path))
    config_module = _remote_module("chatglm3", "configuration_chatglm")
    config = config_module.ChatGLMConfig(
        num_layers=layers,
        padded_vocab_size=tokenizer.vocab_size + 6,  # padded past the specials, as the real 65024 is
        hidden_size=hidden,
        ffn_hidden_size=hidden * 2,
        kv_channels=hidden // 4,
        num_attention_heads=4,
        multi_query_group_num=2,
        torch_dtype="float32",
        eos_token_id=2,
        pad_token_id=0,
        architectures=["ChatGLMModel"],
    )
    model = _remote_module("chatglm3", "modeling_chatglm").ChatGLMForConditionalGeneration(config, empty_init=False)
    _init_random(model, seed=seed, std=std)
    remote = ["configuration_chatglm.py", "modeling_chatglm.py", "tokenization_chatglm.py"]
    auto_map = {
        "AutoConfig": "configuration_chatglm.ChatGLMConfig",
        "AutoModel": "modeling_chatglm.ChatGLMForConditionalGeneration",
        "AutoModelForCausalLM": "modeling_chatglm.ChatGLMForConditionalGeneration",
    }
    _write_remote_folder(model, path, "chatglm3", remote, auto_map)
    tokenizer_config = {
        "tokenizer_class": "ChatGLMTokenizer",
        "auto_map": {"AutoTokenizer": ["tokenization_chatglm.ChatGLMTokenizer", None]},
        "padding_side": "left",
        "clean_up_tokenization_spaces": False,
        "remove_space": False,
        "do_lower_case": False,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2], "pad_token_id": 0}), encoding="utf-8")
    return path


def tiny_minicpm(path: Path | str, *, seed: int = 0, layers: int = 2, hidden: int = 64, std: float = 0.1) -> Path:
    """A random MiniCPM-2B-structured model with its remote code and a LlamaTokenizer; returns ``path``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    sp_path = train_sentencepiece(path / "tokenizer.model", user_symbols=("<用户>", "<AI>"))
    import sentencepiece as spm

    vocab = spm.SentencePieceProcessor(model_file=str(sp_path)).vocab_size()
    config = _remote_module("minicpm", "configuration_minicpm").MiniCPMConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        dim_model_base=hidden // 8,  # width scale 8 (MiniCPM-2B: 2304 / 256 = 9)
        torch_dtype="float32",
        architectures=["MiniCPMForCausalLM"],
    )
    modeling = _minicpm_modeling_with_shims()
    model = modeling.MiniCPMForCausalLM(config)
    _init_random(model, seed=seed, std=std)
    auto_map = {
        "AutoConfig": "configuration_minicpm.MiniCPMConfig",
        "AutoModel": "modeling_minicpm.MiniCPMModel",
        "AutoModelForCausalLM": "modeling_minicpm.MiniCPMForCausalLM",
    }
    _write_remote_folder(model, path, "minicpm", ["configuration_minicpm.py", "modeling_minicpm.py"], auto_map)
    tokenizer_config = {
        "tokenizer_class": "LlamaTokenizer",
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "legacy": True,
        "chat_template": MINICPM_OWN_TEMPLATE,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, ensure_ascii=False, indent=2),
                                                encoding="utf-8")  # fmt: skip
    (path / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}), encoding="utf-8")
    return path


def _minicpm_modeling_with_shims():
    """The stand-in modeling module, importable under transformers 5 for building the weights here: edumas'
    remote-code shim for the name transformers 5 removed, and (for this build only) the tied weights as the
    mapping transformers 5 expects. The copy written to the model folder keeps the 4.x list."""
    from pipelines.models.chat_encoding import install_remote_code_shims

    install_remote_code_shims()
    module = _remote_module("minicpm", "modeling_minicpm")
    module.MiniCPMForCausalLM._tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    return module


__all__ = ["MINICPM_OWN_TEMPLATE", "tiny_chatglm3", "tiny_minicpm", "train_sentencepiece"]
