"""Model families: chat format, LoRA target modules, remote code, padding and pad token.

One :class:`Family` per supported model family (Qwen1.5/2/2.5/3, MiniCPM-2B, ChatGLM3-6B, Llama-3
and Llama-architecture instruct models such as SmolLM2). The family is detected from the model's
``config.model_type`` and may be overridden in params; an override that contradicts the model is
an error.

The chat format is set ONCE on the tokenizer by :func:`prepare_tokenizer`, and that tokenizer is
saved with every trained model. Training (trl calls ``apply_chat_template``) and evaluation
(:func:`render_prompt`) therefore render prompts identically. Template policies:

- ``own``: use the tokenizer's template; a tokenizer without one is an error.
- ``fallback``: use the tokenizer's template, or ours (``templates/<name>.jinja``) when it has none.
- ``override``: always ours (ChatGLM3 ships a custom ``build_chat_input`` rather than a template).

Token ids (training, length filter, evaluation) come from the encoder that :func:`prepare_tokenizer`
installs (:mod:`pipelines.models.chat_encoding`): ChatGLM3's are built from ids, and every
conversation ending with an assistant turn ends with a stop token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.models.chat_encoding import install_chat_encoder, patch_left_only_pad, patch_pad_in_vocab

TEMPLATE_DIR = Path(__file__).parent / "templates"

LLAMA_LIKE_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class FamilyError(ValueError):
    """The model and the requested family or method do not fit together; the message says the fix."""


@dataclass(frozen=True)
class Family:
    """How to fine-tune one model family.

    ``model_types``: values of ``config.model_type`` that belong to the family.
    ``template_policy`` / ``template``: see the module docstring.
    ``lora_targets``: module names LoRA adapts by default.
    ``trust_remote_code``: whether loading needs the model's own Python code.
    ``pad_candidates``: tokens tried in order when the tokenizer has no pad token.
    ``training_padding_side``: the tokenizer's padding side (trl's collators pad right themselves).
    ``ids_from_ids``: build token ids from ids rather than by tokenizing the rendered text (ChatGLM3).
    ``default_attention``: ``attn_implementation`` for ``auto``; None = do not pass one (the remote code
    has its own attention and no ``_supports_sdpa``, so transformers 5 refuses an explicit ``sdpa``).
    ``supported_attention``: implementations the model's code accepts.
    ``lm_head``: the head trl's trainers score with by default (:mod:`pipelines.training.lm_head`): ``fused``
    (trl's fused LM head) or ``own`` (the model's own forward: its head is not ``lm_head(hidden_states)``).
    ``bos_first``: the model's own chat code starts every sequence with BOS, which its template does not write.
    """

    name: str
    model_types: tuple[str, ...]
    template_policy: str = "own"
    template: str | None = None
    lora_targets: tuple[str, ...] = LLAMA_LIKE_TARGETS
    trust_remote_code: bool = False
    pad_candidates: tuple[str, ...] = ()
    training_padding_side: str = "right"
    ids_from_ids: bool = False
    default_attention: str | None = "sdpa"
    supported_attention: tuple[str, ...] = ("sdpa", "eager", "flash_attention_2")
    lm_head: str = "fused"
    bos_first: bool = False
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def template_text(self) -> str | None:
        """Our Jinja chat template for this family, or None when it relies on the tokenizer's own."""
        if self.template is None:
            return None
        return (TEMPLATE_DIR / f"{self.template}.jinja").read_text(encoding="utf-8")


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            name="qwen2",
            model_types=("qwen2", "qwen3"),
            pad_candidates=("<|endoftext|>",),
            notes="Qwen1.5, Qwen2, Qwen2.5 and Qwen3 share model_type qwen2/qwen3 and the ChatML template.",
        ),
        Family(
            name="llama",
            model_types=("llama",),
            pad_candidates=("<|finetune_right_pad_id|>", "<|reserved_special_token_0|>", "<|endoftext|>", "<unk>"),
            notes="Llama-3 and Llama-architecture instruct models (SmolLM2); the tokenizer's own template.",
        ),
        Family(
            name="minicpm",
            model_types=("minicpm",),
            template_policy="fallback",
            template="minicpm",
            trust_remote_code=True,
            pad_candidates=("<unk>",),
            default_attention=None,  # its remote code declares what it supports; transformers picks
            lm_head="own",  # logits = lm_head(hidden / (hidden_size / dim_model_base)): trl's fused head omits it
            bos_first=True,  # its chat() tokenizes the rendered text with <s>, as its fine-tuning script starts rows
            notes="MiniCPM-2B: <s><用户>…<AI>… format (its template writes neither BOS nor EOS: the encoder adds "
            "both); width-scaled head (own head); remote code.",
        ),
        Family(
            name="chatglm3",
            model_types=("chatglm",),
            template_policy="override",
            template="chatglm3",
            lora_targets=("query_key_value",),
            trust_remote_code=True,
            pad_candidates=("<unk>", "<pad>"),
            training_padding_side="left",  # the remote _pad asserts left padding
            ids_from_ids=True,
            default_attention=None,
            supported_attention=(),  # CoreAttention calls torch SDPA itself; no attn_implementation accepted
            lm_head="own",  # no lm_head: transformer.output_layer on sequence-first hidden states
            notes="ChatGLM3-6B: [gMASK]sop<|user|>\\n text<|assistant|>; fused query_key_value; head "
            "transformer.output_layer (own head); remote code.",
        ),
    )
}


def read_model_type(model_path: Path | str) -> str:
    """``model_type`` from a model folder's ``config.json`` (no weights are loaded)."""
    config_path = Path(model_path) / "config.json"
    if not config_path.exists():
        raise FamilyError(f"{config_path} not found; train.model must be a local model folder (run prepare_models)")
    return str(json.loads(config_path.read_text(encoding="utf-8")).get("model_type", ""))


def detect_family(model_type: str, override: str = "auto") -> Family:
    """The family for ``model_type``; ``override`` (a family name) must agree with it unless it is ``auto``."""
    detected = next((f for f in FAMILIES.values() if model_type in f.model_types), None)
    if override != "auto":
        if override not in FAMILIES:
            raise FamilyError(f"unknown family {override!r}; use auto or one of: {', '.join(FAMILIES)}")
        chosen = FAMILIES[override]
        if model_type not in chosen.model_types:
            raise FamilyError(
                f"family {override!r} does not match the model (config.model_type={model_type!r}, "
                f"expected one of {list(chosen.model_types)}); set family: auto or pick the right model"
            )
        return chosen
    if detected is None:
        supported = sorted(t for f in FAMILIES.values() for t in f.model_types)
        raise FamilyError(
            f"model_type {model_type!r} is not a supported causal chat model family (supported model types: "
            f"{', '.join(supported)}); point train.model at a causal chat LM or add a Family in "
            "pipelines/training/families.py"
        )
    return detected


def prepare_tokenizer(
    tokenizer: Any, family: Family, *, padding_side: str | None = None, stop_ids: tuple[int, ...] = ()
) -> Any:
    """Set chat template, pad token, padding side and the chat encoder on ``tokenizer`` for ``family``.

    ``stop_ids``: the model's own stop tokens (:func:`model_stop_ids`) besides the tokenizer's EOS.

    Raises :class:`FamilyError` when a template is required but missing or no pad token can be chosen.
    """
    ours = family.template_text()
    if family.template_policy == "override" or (family.template_policy == "fallback" and not tokenizer.chat_template):
        tokenizer.chat_template = ours
    if not tokenizer.chat_template:
        raise FamilyError(
            f"the tokenizer has no chat template and family {family.name!r} uses the tokenizer's own; "
            "use the instruct/chat variant of the model or add a template to the family"
        )
    if tokenizer.pad_token is None:
        vocab = tokenizer.get_vocab()
        pad = next((token for token in family.pad_candidates if token in vocab), None)
        if pad is None:
            raise FamilyError(f"no pad token for family {family.name!r}: tried {list(family.pad_candidates)}")
        tokenizer.pad_token = pad
    if family.ids_from_ids:
        patch_left_only_pad(tokenizer)
        patch_pad_in_vocab(tokenizer)
    tokenizer.padding_side = padding_side or family.training_padding_side
    return install_chat_encoder(tokenizer, ids_from_ids=family.ids_from_ids, stop_ids=stop_ids,
                                bos_first=family.bos_first)  # fmt: skip


def model_stop_ids(model_path: Path | str) -> tuple[int, ...]:
    """``eos_token_id`` values from a model folder's ``config.json`` and ``generation_config.json``."""
    ids: list[int] = []
    for name in ("config.json", "generation_config.json"):
        path = Path(model_path) / name
        value = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id") if path.exists() else None
        ids += [value] if isinstance(value, int) else [v for v in value or [] if isinstance(v, int)]
    return tuple(sorted(set(ids)))


def attention_implementation(requested: str, family: Family) -> str | None:
    """The ``attn_implementation`` to pass to ``from_pretrained`` (None: pass none) for a params value."""
    if requested == "auto":
        return family.default_attention
    if requested not in family.supported_attention:
        accepted = ", ".join(family.supported_attention) or "none (it uses torch SDPA internally)"
        raise FamilyError(
            f"attn_implementation {requested!r} is not supported by family {family.name!r} (accepted: {accepted}); "
            "set attn_implementation: auto"
        )
    return requested


def render_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The generation prompt for ``messages`` exactly as training renders it (use this at evaluation)."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def render_conversation(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """A full conversation (ending with the assistant target) as trained on."""
    return tokenizer.apply_chat_template(messages, tokenize=False)


def chat_token_ids(tokenizer: Any, messages: list[dict[str, str]], *, add_generation_prompt: bool = False) -> list[int]:
    """Token ids of ``messages`` as trained on (the prepared tokenizer's encoder); with
    ``add_generation_prompt`` the ids to generate from at evaluation. Prefer these ids to tokenizing
    :func:`render_prompt`'s text: for ChatGLM3 the text does not tokenize to the same ids."""
    encoded = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
    ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
    return list(ids)
