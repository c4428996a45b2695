"""Loading for a training run: tokenizer (with the dataset check), model weights (dtype, attention,
QLoRA, ZeRO-3 order), LoRA settings, the DPO reference decision and the end-of-answer check.

Inputs: a :class:`TrainConfig` and its family; outputs: the objects ``build_trainer`` hands to trl.
Each raises :class:`TrainingSetupError` with the fix when the run cannot start as configured.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import Any

from pipelines.models.chat_encoding import (
    ends_with_stop,
    install_remote_code_shims,
    stop_token_ids,
    tokenizer_fingerprint,
)
from pipelines.models.remote_code import load_remote_aware
from pipelines.training.config import TrainConfig
from pipelines.training.families import Family, attention_implementation, model_stop_ids, prepare_tokenizer

log = logging.getLogger(__name__)


class TrainingSetupError(ValueError):
    """The run cannot start as configured (data, model or hardware); the message says the fix."""


def load_tokenizer(cfg: TrainConfig, family: Family, trust: bool):
    from transformers import AutoTokenizer

    install_remote_code_shims()
    tokenizer = AutoTokenizer.from_pretrained(cfg.model, trust_remote_code=trust)
    return prepare_tokenizer(tokenizer, family, stop_ids=model_stop_ids(cfg.model))


def check_dataset_tokenizer(cfg: TrainConfig, tokenizer) -> None:
    """Refuse a dataset whose length filter used another tokenizer than ``cfg.model``'s (data card)."""
    card_path = Path(cfg.data_card) if cfg.data_card else None
    if card_path is None or not card_path.exists():
        log.warning("no data card at %s: cannot check which tokenizer filtered %s", card_path, cfg.dataset)
        return
    card = json.loads(card_path.read_text(encoding="utf-8"))
    entry = (card.get("targets") or {}).get(cfg.method, card)  # older cards: one tokenizer for both datasets
    recorded = entry.get("tokenizer_sha256")
    if recorded is None:
        log.warning("data card %s records no tokenizer fingerprint for %s; rerun make_datasets", card_path, cfg.method)
    elif recorded != tokenizer_fingerprint(tokenizer):
        built_for = f", built for {entry['section']}" if entry.get("section") else ""
        raise TrainingSetupError(
            f"{cfg.dataset} was length-filtered with the tokenizer of {entry.get('tokenizer')} (family "
            f"{entry.get('family')}{built_for}), not with this run's model {cfg.model}: its token counts do not hold "
            f"for it. make_datasets measures the {cfg.method} dataset with the model of make_datasets.targets."
            f"{cfg.method} (train.{cfg.method} by default): set train.{cfg.method}.model: {cfg.model} (a preset: "
            "python -m pipelines.profiles configs/training/<preset>.yaml --write params.yaml) and rerun make_datasets"
        )


def deepspeed_state(args) -> tuple[bool, bool]:
    """(DeepSpeed on, ZeRO-3 on) for training arguments already created (params or ``accelerate launch``)."""
    from transformers.integrations import is_deepspeed_zero3_enabled

    enabled = bool(getattr(args, "deepspeed", None) or getattr(args, "deepspeed_plugin", None))
    return enabled, enabled and is_deepspeed_zero3_enabled()


SHM_COMM_OP = "deepspeed_shm_comm"


def skip_cpu_shm_comm_op() -> bool:
    """On DeepSpeed's CPU accelerator, mark its shared-memory all-reduce op incompatible so the comm backend
    does not JIT-compile it (~2 min of C++ per fresh virtualenv). Call before the backend is created (before
    the training arguments). Returns whether it did; any other accelerator (CUDA, ...) is left untouched."""
    import deepspeed.ops
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() != "cpu":
        return False
    # The op only speeds up same-host all-reduce in inference-style CPU runs; gloo does training's reductions.
    # deepspeed.ops caches this dict on first access, so the entry holds when TorchBackend calls build_shm_op.
    deepspeed.ops.__compatible_ops__[SHM_COMM_OP] = False
    log.info("DeepSpeed on CPU: %s op disabled (gloo does the reductions; skips a ~2 min C++ build)", SHM_COMM_OP)
    return True


def load_dtype(cfg: TrainConfig, *, deepspeed: bool) -> str:
    """The dtype weights are loaded in. Full tuning in bf16/fp16 outside DeepSpeed loads fp32 weights and
    trains in mixed precision (``bf16``/``fp16`` autocast): pure bf16 weights would round a 5e-7 update
    away. DeepSpeed keeps fp32 master weights itself, and frozen LoRA bases stay in ``cfg.dtype``."""
    if cfg.tuning == "full" and cfg.dtype != "float32" and not deepspeed:
        return "float32"
    return cfg.dtype


def load_model(path: str, cfg: TrainConfig, trust: bool, tokenizer, *, family: Family, deepspeed=False, zero3=False):
    """Load a model for training; call it only after :func:`trainer_args` (ZeRO-3 partitions while loading)."""
    import torch

    kwargs: dict[str, Any] = {"dtype": getattr(torch, load_dtype(cfg, deepspeed=deepspeed))}
    attention = attention_implementation(cfg.attn_implementation, family)
    if attention is not None:
        kwargs["attn_implementation"] = attention
    if cfg.tuning == "qlora":
        from transformers import BitsAndBytesConfig

        require_qlora_support()
        kwargs["quantization_config"] = BitsAndBytesConfig(**qlora_settings(cfg, zero3=zero3))
        if not zero3:  # ZeRO-3 places (and shards) the weights itself; a device_map conflicts with zero.Init
            kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    model = load_remote_aware(path, trust_remote_code=trust, **kwargs)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if cfg.tuning == "qlora":
        model = prepare_quantized_model(model, cfg.schedule.gradient_checkpointing, zero3=zero3)
    return model


def prepare_quantized_model(model, gradient_checkpointing: bool, *, zero3: bool):
    """peft's ``prepare_model_for_kbit_training`` for QLoRA on one GPU per model copy; skipped under ZeRO-3.

    It upcasts every non-4-bit weight to fp32. Sharded QLoRA (ZeRO-3) stores the 4-bit weights in the compute
    dtype so that all parameters share one dtype for DeepSpeed to shard (``bnb_4bit_quant_storage``); the upcast
    would break that and hold an fp32 copy of the embeddings and norms on every rank until DeepSpeed casts them
    back. trl skips it for sharded QLoRA too (``is_sharded_qlora``); trl and the Trainer enable input gradients
    for gradient checkpointing with PEFT themselves.
    """
    if zero3:
        log.info("QLoRA under ZeRO-3: weights kept in the quantisation storage dtype (no fp32 upcast)")
        return model
    from peft import prepare_model_for_kbit_training

    return prepare_model_for_kbit_training(model, gradient_checkpointing)


def require_qlora_support() -> None:
    """QLoRA needs a CUDA GPU and bitsandbytes; raise a clear error otherwise."""
    import torch

    if not torch.cuda.is_available():
        raise TrainingSetupError("tuning: qlora needs a CUDA GPU (4-bit bitsandbytes); use tuning: lora on CPU")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise TrainingSetupError("tuning: qlora needs bitsandbytes; pip install 'bitsandbytes>=0.45'")


def qlora_settings(cfg: TrainConfig, *, zero3: bool) -> dict[str, Any]:
    """``BitsAndBytesConfig`` arguments: 4-bit NF4, double quantisation, compute in the run's dtype.

    Under ZeRO-3 the 4-bit weights are stored in the compute dtype (``bnb_4bit_quant_storage``) so
    DeepSpeed can shard them like the other parameters (transformers' DeepSpeed + QLoRA recipe).
    """
    import torch

    compute = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float16
    settings: dict[str, Any] = {
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
        "bnb_4bit_compute_dtype": compute,
    }
    if zero3:
        settings["bnb_4bit_quant_storage"] = compute
    return settings


def lora_config(cfg: TrainConfig, family: Family):
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora.r,
        lora_alpha=cfg.lora.alpha,
        lora_dropout=cfg.lora.dropout,
        target_modules=list(cfg.lora.target_modules or family.lora_targets),
        task_type="CAUSAL_LM",
    )


def needs_reference_model(cfg: TrainConfig) -> bool:
    """Full-tuning DPO loads a reference model unless its log-probs are precomputed from the base itself.

    trl keeps a passed ``ref_model`` for the whole run even with ``precompute_ref_log_probs``; without
    one it precomputes with the untrained policy, which is the base model.
    """
    reference = cfg.dpo.reference_model
    same_as_base = reference is None or Path(reference).resolve() == Path(cfg.model).resolve()
    return not (cfg.dpo.precompute_ref_log_probs and same_as_base)


def check_rows_end_with_stop(trainer, tokenizer, cfg: TrainConfig) -> None:
    """Every trained answer must end with a stop token, or the model never learns to stop.

    Checks the tokenized training rows (SFT: the last label; DPO: the chosen and rejected ids) after
    trl's truncation to ``max_length``; template whitespace after the stop token is allowed.
    """
    stops = stop_token_ids(tokenizer, {"eos": model_stop_ids(cfg.model)})

    bad = 0
    for row in trainer.train_dataset:
        if cfg.method == "sft":
            if "labels" in row:
                trained = [t for t in row["labels"] if t != -100]
            else:
                mask = row.get("completion_mask") or [1] * len(row["input_ids"])
                trained = [t for t, keep in zip(row["input_ids"], mask, strict=True) if keep]
            bad += not ends_with_stop(tokenizer, trained, stops)
        else:
            for side in ("chosen_ids", "rejected_ids"):
                too_long = len(row["prompt_ids"]) + len(row[side]) > cfg.max_length
                bad += too_long or not ends_with_stop(tokenizer, row[side], stops)
    if bad:
        raise TrainingSetupError(
            f"{bad} training answer(s) in {cfg.dataset} do not end with a stop token {sorted(stops)} (cut by "
            f"max_length {cfg.max_length}, or a chat template without EOS): rebuild the dataset for this run "
            "(make_datasets filters with the max_length of the train section in make_datasets.targets)"
        )
