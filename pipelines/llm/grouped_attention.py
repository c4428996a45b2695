"""Grouped-query attention without copying the key/value heads, for the local transformers backend.

transformers' ``sdpa`` attention keeps the key/value heads grouped (torch's ``enable_gqa``) only when
no attention mask is given. A left-padded batch has one, so every layer of every decoding step
copied its whole key/value cache ``num_key_value_groups`` times (``repeat_kv``; 3 for SmolLM2)
before attending: on CPU that copy and the wider attention were about a quarter of the smoke
profile's ``evaluate`` stage (py-spy). :func:`grouped_sdpa_attention` hands torch's SDPA the same
mask with the heads still grouped: the same scores and softmax, without the copy
(``tests/llm/test_grouped_attention.py`` compares the logits and the greedy replies with ``sdpa``).

:func:`use_grouped_attention` switches a loaded model that runs ``sdpa`` to it; other
implementations (eager, flash attention, remote code with its own attention) are left as they are.
"""

from __future__ import annotations

from typing import Any

NAME = "edumas_grouped_sdpa"


def grouped_sdpa_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers' ``sdpa_attention_forward``, but a masked call keeps the key/value heads grouped."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    plain = (
        attention_mask is None
        or getattr(module, "num_key_value_groups", 1) == 1
        or kwargs.get("position_bias") is not None
        or kwargs.get("output_attentions", False)
    )
    if plain:  # nothing to save (no mask: sdpa groups the heads itself), or features only sdpa handles
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    output = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=False, enable_gqa=True
    )  # a mask given: sdpa's is_causal is False too (the mask carries causality and padding)
    return output.transpose(1, 2).contiguous(), None


def register_grouped_attention() -> None:
    """Register :func:`grouped_sdpa_attention` (and sdpa's mask builder for it) with transformers."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(NAME, grouped_sdpa_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)


def use_grouped_attention(model: Any) -> bool:
    """Switch ``model`` from ``sdpa`` to :func:`grouped_sdpa_attention`; False (model unchanged) when it
    runs another attention implementation."""
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    register_grouped_attention()
    model.set_attn_implementation(NAME)
    return True
