"""Which head scores the trained tokens: trl's fused LM head, or the model's own forward.

trl 1.16's ``SFTTrainer`` and ``DPOTrainer`` patch every model with ``trl.trainer.utils.add_fused_lm_head``:
called with ``fused_lm_head=True`` the model runs its backbone (``model.base_model``), takes
``get_output_embeddings()`` and computes per-token log-probabilities itself, reading the logit scales it
knows from the config. A family whose head is not ``lm_head(last_hidden_state)`` is scored wrongly or
crashes there: ChatGLM3 (head ``transformer.output_layer``, no ``lm_head``, sequence-first hidden states)
and MiniCPM-2B (hidden states divided by ``hidden_size / dim_model_base`` before ``lm_head``).

While the trainer is built (:func:`trainer_lm_head`), edumas routes trl's calls of ``add_fused_lm_head``
through :func:`add_switchable_lm_head`: trl's fused head is installed as before, and a switch on the model
chooses per call between it (``"fused"``) and :func:`own_head_output` (``"own"``): the model's own forward,
logits included, turned into the same ``FusedCausalLMOutput``. The switch is an attribute, never a new
``forward`` after accelerate has wrapped it, so :mod:`pipelines.training.head_probe` can flip it at the
first step. Families with a known custom head start on ``"own"`` (``Family.lm_head``).
"""

from __future__ import annotations

import functools
import types
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

HEAD_PATHS = ("fused", "own")
SWITCH_ATTRIBUTE = "_edumas_lm_head"


@dataclass
class HeadSwitch:
    """The head a patched model uses for ``fused_lm_head=True`` calls; shared by a model and its wrappers."""

    path: str = "fused"
    plain_forward: Any = None  # the model's forward before trl patched it (the probe's independent reference)

    def __post_init__(self) -> None:
        if self.path not in HEAD_PATHS:
            raise ValueError(f"lm_head path {self.path!r}: use one of {HEAD_PATHS}")


def head_switch(model: Any) -> HeadSwitch | None:
    """The switch of ``model`` (a PEFT model's base model too), or None when trl never patched it."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(base, SWITCH_ATTRIBUTE, None)


def own_head_output(
    forward,
    args: tuple,
    kwargs: dict[str, Any],
    *,
    labels=None,
    shift_labels=None,
    num_items_in_batch=None,
    temperature: float = 1.0,
    outputs: tuple[str, ...] = ("log_probs",),
):
    """trl's ``FusedCausalLMOutput`` computed from the logits of ``forward`` (the model's own head).

    Same contract as trl's fused head: per-token fields are zero where the label is ``-100``; ``labels`` are
    shifted by one unless ``shift_labels`` (already shifted) are given; ``loss`` is the summed negative
    log-likelihood over ``num_items_in_batch`` (or the number of labelled tokens). ``entropy``,
    ``log_sum_sq_probs``, ``mean_logits`` and ``is_top1`` carry no gradient (edumas' trainers log them only).
    """
    import torch
    from trl.trainer.utils import FusedCausalLMOutput

    kwargs = dict(kwargs, use_cache=False)
    result = forward(*args, **kwargs)
    logits = result.logits if hasattr(result, "logits") else result[0]
    if shift_labels is None:
        logits, targets = logits[:, :-1], labels[:, 1:]
    else:
        targets = shift_labels
    targets = targets.to(logits.device)
    mask = targets != -100
    scores = logits[mask].float() / temperature
    picked = targets[mask]
    log_softmax = scores.log_softmax(dim=-1)
    picked_log_probs = log_softmax.gather(-1, picked.unsqueeze(-1)).squeeze(-1)

    def spread(values):
        return values.new_zeros(mask.shape, dtype=values.dtype).masked_scatter(mask, values)

    extra: dict[str, Any] = {}
    with torch.no_grad():
        if "entropy" in outputs:
            extra["entropy"] = spread(-(log_softmax.exp() * log_softmax).sum(-1))
        if "log_sum_sq_probs" in outputs:
            extra["log_sum_sq_probs"] = spread(torch.logsumexp(2 * log_softmax, dim=-1))
        if "mean_logits" in outputs:
            extra["mean_logits"] = spread(scores.mean(-1))
        if "is_top1" in outputs:
            extra["is_top1"] = spread(scores.argmax(-1) == picked)
    log_probs = spread(picked_log_probs)
    count = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
    return FusedCausalLMOutput(loss=-log_probs.sum() / count, log_probs=log_probs, label_mask=mask, **extra)


def add_switchable_lm_head(
    model,
    temperature: float = 1.0,
    cast_lm_head_to_fp32: bool = False,
    outputs: tuple[str, ...] = ("log_probs",),
    *,
    path: str = "fused",
    trl_add_fused_lm_head=None,
) -> HeadSwitch:
    """trl's ``add_fused_lm_head`` (same arguments) plus the switch to the model's own head; returns the switch."""
    if trl_add_fused_lm_head is None:
        from trl.trainer.utils import add_fused_lm_head as trl_add_fused_lm_head
    own_forward = model.forward
    trl_add_fused_lm_head(model, temperature=temperature, cast_lm_head_to_fp32=cast_lm_head_to_fp32, outputs=outputs)
    fused_forward = model.forward
    switch = getattr(model, SWITCH_ATTRIBUTE, None) or HeadSwitch(path)
    switch.plain_forward = switch.plain_forward or own_forward

    @functools.wraps(type(model).forward)  # generate validates its kwargs against this signature
    def forward(self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None, **kwargs):
        if fused_lm_head and switch.path == "own":
            return own_head_output(
                own_forward, args, kwargs, labels=labels, shift_labels=shift_labels,
                num_items_in_batch=num_items_in_batch, temperature=temperature, outputs=outputs,
            )  # fmt: skip
        return fused_forward(
            *args, fused_lm_head=fused_lm_head, labels=labels, shift_labels=shift_labels,
            num_items_in_batch=num_items_in_batch, **kwargs,
        )  # fmt: skip

    model.forward = types.MethodType(forward, model)
    setattr(model, SWITCH_ATTRIBUTE, switch)
    return switch


@contextmanager
def trainer_lm_head(path: str) -> Iterator[None]:
    """While trl's SFT/DPO trainers are built, their ``add_fused_lm_head`` calls add the switch (start: ``path``).

    trl 1.16 calls ``add_fused_lm_head`` from ``trl/trainer/sft_trainer.py`` and ``dpo_trainer.py`` (policy, and
    the reference model when there is one); DPO's precomputed reference log-probs are scored inside the
    constructor, so the head must be chosen before it runs.
    """
    from trl.trainer import dpo_trainer, sft_trainer, utils

    HeadSwitch(path)  # validates
    modules = (sft_trainer, dpo_trainer)
    missing = [m.__name__ for m in modules if getattr(m, "add_fused_lm_head", None) is not utils.add_fused_lm_head]
    if missing:
        raise RuntimeError(
            f"{missing} no longer call trl.trainer.utils.add_fused_lm_head (checked against trl 1.16); "
            "review pipelines/training/lm_head.py for this trl version"
        )
    original = utils.add_fused_lm_head

    def add(model, temperature=1.0, cast_lm_head_to_fp32=False, outputs=("log_probs",)):
        add_switchable_lm_head(model, temperature, cast_lm_head_to_fp32, tuple(outputs), path=path,
                               trl_add_fused_lm_head=original)  # fmt: skip

    for module in modules:
        module.add_fused_lm_head = add
    try:
        yield
    finally:
        for module in modules:
            module.add_fused_lm_head = original
