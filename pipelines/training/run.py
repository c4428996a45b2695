"""One SFT or DPO run with trl: load, adapt (LoRA / QLoRA / full), train, resume, save, describe.

Input: a :class:`TrainConfig` and the dataset folder written by ``make_datasets``. Outputs under
``output_dir``: ``checkpoints/`` (resumable), ``final/`` (adapter or full weights, tokenizer with
its chat template, ``README.md`` model card, ``training_summary.json``), optionally ``merged/``.
Works the same in one process and under ``accelerate launch`` (DeepSpeed / multi-GPU): the
trainers handle the distribution; only the main process writes cards and merges.

Order matters under DeepSpeed ZeRO-3: the training arguments (which register the DeepSpeed config
with transformers) are created before any model is loaded, so ``from_pretrained`` runs inside
``deepspeed.zero.Init`` and every rank holds only its shard.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pipelines.models.fingerprint import folder_fingerprint
from pipelines.training.chat_encoding import install_remote_code_shims, tokenizer_fingerprint
from pipelines.training.checkpoints import checkpoint_step, dataset_hash, resolve_resume, run_fingerprint
from pipelines.training.config import TrainConfig
from pipelines.training.families import (
    Family,
    FamilyError,
    attention_implementation,
    detect_family,
    model_stop_ids,
    prepare_tokenizer,
    read_model_type,
)
from pipelines.training.rows import REQUIRED_COLUMNS
from pipelines.training.summary import loss_history, write_run_summary

log = logging.getLogger(__name__)


class TrainingSetupError(ValueError):
    """The run cannot start as configured (data, model or hardware); the message says the fix."""


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def load_training_data(cfg: TrainConfig):
    """The ``train``/``eval`` splits of ``cfg.dataset``, reduced to the columns ``cfg.method`` needs."""
    from datasets import load_from_disk

    path = Path(cfg.dataset)
    if not path.exists():
        raise TrainingSetupError(f"dataset {path} not found; run the make_datasets stage first")
    if (path / "EMPTY.md").exists():
        raise TrainingSetupError(f"dataset {path} has no rows; check make_datasets inputs and the data card")
    # in memory: trl's map() calls would otherwise write cache files into the DVC-tracked dataset folder
    data = load_from_disk(str(path), keep_in_memory=True)
    if "train" not in data:
        raise TrainingSetupError(f"dataset {path} has no 'train' split (found {list(data)}); rebuild it")
    needed = REQUIRED_COLUMNS[cfg.method]
    missing = [c for c in needed if c not in data["train"].column_names]
    if missing:
        raise TrainingSetupError(
            f"dataset {path} lacks column(s) {missing} needed by method {cfg.method!r} (has "
            f"{data['train'].column_names}); point train.dataset at the {cfg.method} dataset (e.g. data/train/"
            f"{cfg.method}) or change method"
        )
    if len(data["train"]) == 0:
        raise TrainingSetupError(f"dataset {path} has no training rows; check make_datasets inputs and its data card")
    splits = {name: data[name].select_columns(list(needed)) for name in data if len(data[name])}
    return splits["train"], splits.get("eval")


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
    recorded = card.get("tokenizer_sha256")
    if recorded is None:
        log.warning("data card %s predates tokenizer fingerprints; rerun make_datasets to have it checked", card_path)
    elif recorded != tokenizer_fingerprint(tokenizer):
        raise TrainingSetupError(
            f"{cfg.dataset} was length-filtered with the tokenizer of {card.get('tokenizer')} (family "
            f"{card.get('family')}), not with train.model {cfg.model}'s: its token counts do not hold for this model. "
            f"Set make_datasets.tokenizer: {cfg.model} and rerun make_datasets"
        )


def deepspeed_state(args) -> tuple[bool, bool]:
    """(DeepSpeed on, ZeRO-3 on) for training arguments already created (params or ``accelerate launch``)."""
    from transformers.integrations import is_deepspeed_zero3_enabled

    enabled = bool(getattr(args, "deepspeed", None) or getattr(args, "deepspeed_plugin", None))
    return enabled, enabled and is_deepspeed_zero3_enabled()


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
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": getattr(torch, load_dtype(cfg, deepspeed=deepspeed)), "trust_remote_code": trust}
    attention = attention_implementation(cfg.attn_implementation, family)
    if attention is not None:
        kwargs["attn_implementation"] = attention
    if cfg.tuning == "qlora":
        from transformers import BitsAndBytesConfig

        require_qlora_support()
        kwargs["quantization_config"] = BitsAndBytesConfig(**qlora_settings(cfg, zero3=zero3))
        if not zero3:  # ZeRO-3 places (and shards) the weights itself; a device_map conflicts with zero.Init
            kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if cfg.tuning == "qlora":
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, cfg.schedule.gradient_checkpointing)
    return model


def require_qlora_support() -> None:
    """QLoRA needs a CUDA GPU and bitsandbytes; raise a clear error otherwise."""
    import importlib.util

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


def _cpu_ddp_backend() -> str | None:
    """``gloo`` when several CPU processes were launched (accelerate counts them then); else the default."""
    import torch

    several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    return "gloo" if several and not torch.cuda.is_available() else None


def _cpu_mixed_precision(cfg: TrainConfig) -> bool:
    """bf16/fp16 on a machine without CUDA and outside DeepSpeed: the Trainer needs ``use_cpu`` for autocast."""
    import torch

    deepspeed = bool(cfg.deepspeed) or os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    return cfg.dtype != "float32" and not torch.cuda.is_available() and not deepspeed


def trainer_args(cfg: TrainConfig, *, report_to: str, run_name: str | None, has_eval: bool = True):
    """SFTConfig or DPOConfig from the run's params (no periodic evaluation without an eval split)."""
    from trl import DPOConfig, SFTConfig

    s = cfg.schedule
    common = dict(
        output_dir=str(cfg.checkpoints_dir),
        max_steps=s.max_steps,
        num_train_epochs=s.num_train_epochs,
        learning_rate=s.learning_rate,
        lr_scheduler_type=s.lr_scheduler_type,
        warmup_steps=s.warmup_ratio,  # transformers 5: a float below 1 is a ratio of the total steps
        weight_decay=s.weight_decay,
        max_grad_norm=s.max_grad_norm,
        per_device_train_batch_size=s.per_device_train_batch_size,
        per_device_eval_batch_size=s.per_device_eval_batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        gradient_checkpointing=s.gradient_checkpointing,
        optim=s.optim,
        logging_steps=s.logging_steps,
        eval_strategy="steps" if s.eval_steps and has_eval else "no",
        eval_steps=s.eval_steps if has_eval else None,
        save_strategy="steps",
        save_steps=s.save_steps,
        save_total_limit=s.save_total_limit,
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=cfg.dtype == "bfloat16",
        fp16=cfg.dtype == "float16",
        max_length=cfg.max_length,
        report_to=report_to,
        run_name=run_name,
        deepspeed=cfg.deepspeed,
        ddp_backend=_cpu_ddp_backend(),
        use_cpu=_cpu_mixed_precision(cfg),
        disable_tqdm=False,
    )
    if cfg.method == "sft":
        return SFTConfig(**common, packing=cfg.sft.packing, completion_only_loss=cfg.sft.completion_only_loss)
    return DPOConfig(
        **common,
        beta=cfg.dpo.beta,
        loss_type=[cfg.dpo.loss_type],
        label_smoothing=cfg.dpo.label_smoothing,
        precompute_ref_log_probs=cfg.dpo.precompute_ref_log_probs,
    )


def build_trainer(cfg: TrainConfig, *, report_to: str = "none", run_name: str | None = None, callbacks=None):
    """Everything up to ``trainer.train()``: returns (trainer, family, tokenizer)."""
    from transformers import set_seed
    from trl import DPOTrainer, SFTTrainer

    set_seed(cfg.seed)
    model_type = read_model_type(cfg.model)
    family = detect_family(model_type, cfg.family)
    trust = family.trust_remote_code if cfg.trust_remote_code is None else cfg.trust_remote_code
    train_data, eval_data = load_training_data(cfg)
    tokenizer = load_tokenizer(cfg, family, trust)
    check_dataset_tokenizer(cfg, tokenizer)
    # before loading: the DeepSpeed config must be registered for zero.Init
    args = trainer_args(cfg, report_to=report_to, run_name=run_name, has_eval=eval_data is not None)
    deepspeed, zero3 = deepspeed_state(args)
    model = load_model(cfg.model, cfg, trust, tokenizer, family=family, deepspeed=deepspeed, zero3=zero3)
    peft_config = lora_config(cfg, family) if cfg.tuning in ("lora", "qlora") else None
    common = dict(
        model=model,
        args=args,
        train_dataset=train_data,
        eval_dataset=eval_data,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    if cfg.method == "sft":
        trainer = SFTTrainer(**common)
    else:
        ref_model = None
        if cfg.tuning == "full" and needs_reference_model(cfg):
            reference = cfg.dpo.reference_model or cfg.model
            ref_model = load_model(reference, cfg, trust, tokenizer, family=family, deepspeed=deepspeed, zero3=zero3)
        trainer = DPOTrainer(ref_model=ref_model, **common)
    check_rows_end_with_stop(trainer, tokenizer, cfg)
    return trainer, family, tokenizer


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
    from pipelines.training.chat_encoding import stop_token_ids

    stops = stop_token_ids(tokenizer, {"eos": model_stop_ids(cfg.model)})

    def ends_with_stop(ids: list[int]) -> bool:
        for token in reversed(ids):
            if token in stops:
                return True
            if tokenizer.decode([token]).strip():
                return False
        return False

    bad = 0
    for row in trainer.train_dataset:
        if cfg.method == "sft":
            if "labels" in row:
                trained = [t for t in row["labels"] if t != -100]
            else:
                mask = row.get("completion_mask") or [1] * len(row["input_ids"])
                trained = [t for t, keep in zip(row["input_ids"], mask, strict=True) if keep]
            bad += not ends_with_stop(trained)
        else:
            for side in ("chosen_ids", "rejected_ids"):
                too_long = len(row["prompt_ids"]) + len(row[side]) > cfg.max_length
                bad += too_long or not ends_with_stop(row[side])
    if bad:
        raise TrainingSetupError(
            f"{bad} training answer(s) in {cfg.dataset} do not end with a stop token {sorted(stops)} (cut by "
            f"max_length {cfg.max_length}, or a chat template without EOS): set make_datasets.max_length to at "
            "most train.max_length and rerun make_datasets"
        )


def save_atomically(dest: Path, write) -> None:
    """Call ``write(tmp_dir)`` and rename the folder onto ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    write(tmp)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)


def merge_adapter(base_model: str, adapter_dir: Path, dest: Path, *, trust: bool = False) -> None:
    """Load the base model, apply the adapter, merge it into the weights and save to ``dest``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(base_model, dtype="auto", trust_remote_code=trust)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    tokenizer = AutoTokenizer.from_pretrained(str(adapter_dir), trust_remote_code=trust)

    def write(tmp: Path) -> None:
        merged.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    save_atomically(dest, write)


def run_training(cfg: TrainConfig, *, report_to: str = "none", run_name: str | None = None, callbacks=None) -> dict:
    """Train (resuming when possible), evaluate, save final artefacts; returns the metrics."""
    data_sha = dataset_hash(cfg.dataset) if Path(cfg.dataset).exists() else ""
    trainer, family, tokenizer = build_trainer(cfg, report_to=report_to, run_name=run_name, callbacks=callbacks)
    model_sha = folder_fingerprint(Path(cfg.model)) if Path(cfg.model).is_dir() else cfg.model
    template_sha = hashlib.sha256(str(tokenizer.chat_template).encode()).hexdigest()
    world_size = trainer.args.world_size
    fingerprint = run_fingerprint(cfg.model_dump(), data_sha, model_sha, template_sha, world_size=world_size)
    checkpoint = resolve_resume(cfg.checkpoints_dir, fingerprint, cfg.resume, is_main=trainer.is_world_process_zero())
    resumed_from = checkpoint_step(checkpoint) if checkpoint else 0
    result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    steps_this_run = trainer.state.global_step - resumed_from
    metrics: dict[str, Any] = {k: v for k, v in result.metrics.items() if isinstance(v, (int, float))}
    history = loss_history(trainer.state.log_history)
    # HF divides the loss summed over this run's steps by the global step: rescale after a resume
    if steps_this_run > 0:
        train_loss = result.training_loss * trainer.state.global_step / steps_this_run
    else:
        train_loss = sum(h["loss"] for h in history) / len(history) if history else None
    metrics.update({"train_loss": train_loss, "global_step": trainer.state.global_step})
    if trainer.eval_dataset is not None:
        metrics.update({k: v for k, v in trainer.evaluate().items() if isinstance(v, (int, float))})
    if history:
        metrics["first_logged_loss"], metrics["last_logged_loss"] = history[0]["loss"], history[-1]["loss"]
    metrics["resumed_from_step"] = resumed_from
    metrics["steps_this_run"] = steps_this_run

    def write_final(tmp: Path) -> None:
        trainer.save_model(str(tmp))
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(str(tmp))

    if trainer.is_world_process_zero():
        save_atomically(cfg.final_dir, write_final)
    else:  # every rank takes part in gathering ZeRO-3 weights; only rank 0 writes
        trainer.save_model(str(cfg.final_dir))
    trainer.accelerator.wait_for_everyone()
    if not trainer.is_world_process_zero():
        return metrics
    trust = family.trust_remote_code if cfg.trust_remote_code is None else cfg.trust_remote_code
    if cfg.merge:
        merge_adapter(cfg.model, cfg.final_dir, cfg.merged_dir, trust=trust)
    write_run_summary(cfg, family, metrics, history, checkpoint, data_sha, run_name)
    return metrics


__all__ = ["FamilyError", "TrainingSetupError", "build_trainer", "merge_adapter", "run_training"]
