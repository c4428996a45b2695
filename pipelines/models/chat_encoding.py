"""Token ids of chat conversations exactly as each model family trains on them, and remote-code shims.

Training (trl's SFT and DPO trainers call ``tokenizer.apply_chat_template(..., tokenize=True)``),
the length filter of ``make_datasets`` and evaluation (:func:`pipelines.training.families.chat_token_ids`)
all go through the encoder that :func:`install_chat_encoder` puts on the tokenizer instance:

- ChatGLM3 (``ids_from_ids``): ids are built from ids, as the official ``build_chat_input`` and
  fine-tuning recipe do: ``[gMASK]`` and ``sop`` by id, per message ``<|role|>`` by id followed by
  ``build_single_message``'s encoding, and ``eos_token_id`` after a final assistant turn. Tokenizing
  the rendered text would not give these ids: ``ChatGLMTokenizer`` splits ``[gMASK]``/``sop`` as text
  always and ``<|user|>`` unless ``encode_special_tokens=True``, and ``</s>`` as text is not id 2.
- every family: a conversation that ends with an assistant turn ends with a stop token (the
  tokenizer's or the model's ``eos_token_id``); when the template writes none (MiniCPM-2B-sft's own
  template) ``eos_token_id`` is appended, so the model learns to stop. Whitespace the template writes
  after it (Qwen's ``<|im_end|>\\n``) is kept, so the ids still equal the model's own format.
- ``bos_first`` (MiniCPM-2B): the ids start with ``bos_token_id``, as the model's ``chat()`` (which tokenizes
  the rendered text with the tokenizer's ``<s>``) and its fine-tuning script start them; its template writes none.

Shims for remote code written against transformers 4.x (see docs/clusters.md):
``is_torch_fx_available`` (removed from ``transformers.utils.import_utils`` in transformers 5, imported
by MiniCPM's ``modeling_minicpm.py``) and ChatGLM3's ``_pad`` (no ``padding_side`` argument,
asserts left padding).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import types
from collections.abc import Iterable
from typing import Any


class ChatEncodingError(ValueError):
    """The tokenizer cannot encode the conversation as the family needs; the message says the fix."""


def install_remote_code_shims() -> None:
    """Re-add names transformers 5 removed that remote model code still imports (idempotent)."""
    import transformers.utils.import_utils as import_utils

    if not hasattr(import_utils, "is_torch_fx_available"):
        # MiniCPM only uses it to torch.fx.wrap a mask helper for fx tracing, which training never does.
        import_utils.is_torch_fx_available = lambda: False


def stop_token_ids(tokenizer: Any, model_config: dict[str, Any] | None = None) -> set[int]:
    """Ids that end generation: the tokenizer's ``eos_token_id`` and the model's (config / generation config)."""
    ids: set[int] = set()
    for value in (getattr(tokenizer, "eos_token_id", None), *(model_config or {}).values()):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return ids


def chatglm3_token_ids(tokenizer: Any, messages: list[dict[str, str]], *, add_generation_prompt: bool) -> list[int]:
    """ChatGLM3 ids built from ids: ``[gMASK] sop``, each message's ``build_single_message``, then
    ``<|assistant|>`` for a generation prompt or ``eos_token_id`` after a final assistant turn."""
    for name in ("get_command", "build_single_message"):
        if not hasattr(tokenizer, name):
            raise ChatEncodingError(
                f"family chatglm3 needs ChatGLMTokenizer.{name} (the remote tokenization_chatglm.py of chatglm3-6b, "
                "2024 revision); load the tokenizer with trust_remote_code: true from a complete chatglm3-6b folder"
            )
    ids = [tokenizer.get_command("[gMASK]"), tokenizer.get_command("sop")]
    for message in messages:
        ids += list(tokenizer.build_single_message(message["role"], "", message["content"]))
    if add_generation_prompt:
        ids.append(tokenizer.get_command("<|assistant|>"))
    elif messages and messages[-1]["role"] == "assistant":
        ids.append(tokenizer.eos_token_id)
    return ids


def ends_with_stop(tokenizer: Any, ids: list[int], stops: set[int]) -> bool:
    """Whether the last token of ``ids`` that is not template whitespace is one of ``stops``."""
    for token in reversed(ids):
        if token in stops:
            return True
        if tokenizer.decode([token]).strip():
            return False
    return False


def install_chat_encoder(
    tokenizer: Any, *, ids_from_ids: bool = False, stop_ids: Iterable[int] = (), bos_first: bool = False
) -> Any:
    """Wrap ``tokenizer.apply_chat_template`` (on this instance) so tokenized conversations follow the
    module docstring's rules; text rendering (``tokenize=False``) is unchanged. Returns ``tokenizer``."""
    original = getattr(tokenizer, "_edumas_original_apply_chat_template", None) or tokenizer.apply_chat_template
    stops = set(stop_ids) | stop_token_ids(tokenizer)
    if not stops:
        raise ChatEncodingError("the tokenizer has no eos_token_id and the model names no stop token; set one")
    if bos_first and getattr(tokenizer, "bos_token_id", None) is None:
        raise ChatEncodingError("the family starts sequences with BOS but the tokenizer has no bos_token; set one")

    def apply_chat_template(self, conversation, *args, tokenize: bool = True, **kwargs):
        add_generation_prompt = bool(kwargs.get("add_generation_prompt", False))
        if not tokenize or (conversation and not isinstance(conversation[0], dict)):
            return original(conversation, *args, tokenize=tokenize, **kwargs)  # text, or a batch: unchanged
        return_dict = kwargs.get("return_dict", True)
        if ids_from_ids:
            ids = chatglm3_token_ids(self, list(conversation), add_generation_prompt=add_generation_prompt)
            encoded = {"input_ids": ids, "attention_mask": [1] * len(ids)}
        else:
            result = original(conversation, *args, tokenize=True, **(kwargs | {"return_dict": True}))
            encoded = {key: list(value) for key, value in result.items()}
            ids = encoded["input_ids"]
            ends_with_answer = conversation and conversation[-1]["role"] == "assistant"
            if ends_with_answer and not add_generation_prompt and not ends_with_stop(self, ids, stops):
                for key, value in encoded.items():
                    value.append(self.eos_token_id if key == "input_ids" else 1)
            if bos_first and (not ids or ids[0] != self.bos_token_id):
                for key, value in encoded.items():
                    value.insert(0, self.bos_token_id if key == "input_ids" else int(key == "attention_mask"))
        if kwargs.get("return_assistant_tokens_mask") and "assistant_masks" not in encoded:
            raise ChatEncodingError("assistant_only_loss needs a {% generation %} template; use completion_only_loss")
        return encoded if return_dict else encoded["input_ids"]

    tokenizer._edumas_original_apply_chat_template = original
    tokenizer.apply_chat_template = types.MethodType(apply_chat_template, tokenizer)
    return tokenizer


def patch_pad_in_vocab(tokenizer: Any) -> Any:
    """List the pad token in ``get_vocab()`` when the tokenizer maps it to its id but leaves it out there.

    ChatGLM3's ``get_vocab`` turns ids 0-2 (``<unk>``/pad, ``<s>``, ``</s>``) into empty strings, so its pad
    token ``<unk>`` (id 0) is missing from the vocabulary; trl's SFT and DPO trainers refuse such a pad token.
    Returns ``tokenizer``.
    """
    pad, pad_id = tokenizer.pad_token, tokenizer.pad_token_id
    legacy = tokenizer.get_vocab
    if pad is None or pad in legacy() or tokenizer.convert_tokens_to_ids(pad) != pad_id:
        return tokenizer

    def get_vocab(self):
        return legacy() | {pad: pad_id}

    tokenizer.get_vocab = types.MethodType(get_vocab, tokenizer)
    return tokenizer


def patch_left_only_pad(tokenizer: Any) -> Any:
    """Give a remote ``_pad`` without a ``padding_side`` argument (ChatGLM3) the one transformers 5 passes.

    Left padding (what the remote code supports) is passed through; right padding raises a clear
    error instead of an ``AssertionError`` deep in the tokenizer. Returns ``tokenizer``.
    """
    legacy = tokenizer._pad
    if "padding_side" in inspect.signature(legacy).parameters:
        return tokenizer

    def _pad(self, encoded_inputs, max_length=None, padding_strategy=None, pad_to_multiple_of=None,
             padding_side=None, return_attention_mask=None):  # fmt: skip
        side = padding_side or self.padding_side
        if side != "left":
            raise ChatEncodingError(
                f"{type(self).__name__} pads on the left only (its remote _pad asserts it); "
                "pad with padding_side='left'"
            )
        options = {"max_length": max_length, "pad_to_multiple_of": pad_to_multiple_of}
        if padding_strategy is not None:
            options["padding_strategy"] = padding_strategy
        return legacy(encoded_inputs, return_attention_mask=return_attention_mask, **options)

    tokenizer._pad = types.MethodType(_pad, tokenizer)
    return tokenizer


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """SHA-256 of what decides token lengths: the vocabulary, the chat template and the special ids."""
    digest = hashlib.sha256()
    digest.update(json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False).encode("utf-8"))
    digest.update(str(tokenizer.chat_template).encode("utf-8"))
    digest.update(json.dumps([tokenizer.eos_token_id, tokenizer.pad_token_id, type(tokenizer).__name__]).encode())
    return digest.hexdigest()
