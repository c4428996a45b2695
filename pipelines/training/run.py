"""One SFT or DPO run with trl: load, adapt (LoRA / QLoRA / full), train, resume, save, describe.

Input: a :class:`TrainConfig` and the dataset folder written by ``make_datasets``. Outputs under
``output_dir``: ``checkpoints/`` (resumable), ``final/`` (adapter or full weights, tokenizer with
its chat template, ``README.md`` model card, ``training_summary.json``), optionally ``merged/``.
Works the same in one process and under ``accelerate launch`` (DeepSpeed / multi-GPU): the
trainers handle the distribution; only the main process writes cards and merges.

Order matters under DeepSpeed ZeRO-3: the training arguments (which register the DeepSpeed config
with transformers) are created before any model is loaded, so ``from_pretrained`` runs inside
``deepspeed.zero.Init`` and every rank holds only its shard. The merge after training loads the base
model on the main process alone, so it runs with that registration lifted (:func:`zero3_lifted`).

The trainers are built with the family's LM head (:mod:`pipelines.training.lm_head`) and check it at
the first step (:mod:`pipelines.training.head_probe`); the probe's result is in the metrics as ``lm_head``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pipelines.io import apply_umask_modes
from pipelines.models.fingerprint import folder_fingerprint
from pipelines.models.remote_code import load_remote_aware
from pipelines.training.checkpoint_records import CheckpointRecords, saved_probe
from pipelines.training.checkpoints import (
    ResumeRefused,
    apply_resume_plan,
    checkpoint_step,
    dataset_hash,
    fingerprint_parts,
    plan_resume,
)
from pipelines.training.config import TrainConfig
from pipelines.training.families import Family, FamilyError, detect_family, read_model_type
from pipelines.training.head_probe import DEFAULT_TOLERANCE, HeadParityError, HeadParityProbe
from pipelines.training.lm_head import trainer_lm_head
from pipelines.training.loading import (
    TrainingSetupError,
    check_dataset_tokenizer,
    check_rows_end_with_stop,
    deepspeed_state,
    load_dtype,
    load_model,
    load_tokenizer,
    lora_config,
    needs_reference_model,
    qlora_settings,
    skip_cpu_shm_comm_op,
)
from pipelines.training.rows import REQUIRED_COLUMNS
from pipelines.training.summary import loss_history, run_metrics, write_run_summary

log = logging.getLogger(__name__)


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


def _cpu_ddp_backend() -> str | None:
    """``gloo`` when several CPU processes were launched (accelerate counts them then); else the default."""
    import torch

    several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    return "gloo" if several and not torch.cuda.is_available() else None


def _cpu_mixed_precision(cfg: TrainConfig) -> bool:
    """bf16/fp16 on a machine without CUDA and outside DeepSpeed: the Trainer needs ``use_cpu`` for autocast."""
    import torch

    return cfg.dtype != "float32" and not torch.cuda.is_available() and not uses_deepspeed(cfg)


def uses_deepspeed(cfg: TrainConfig) -> bool:
    """DeepSpeed from the params (``train.deepspeed``) or from ``accelerate launch`` with a DeepSpeed config."""
    return bool(cfg.deepspeed) or os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"


def trainer_args(cfg: TrainConfig, *, report_to: str, run_name: str | None, has_eval: bool = True):
    """SFTConfig or DPOConfig from the run's params (no periodic evaluation without an eval split)."""
    from trl import DPOConfig, SFTConfig

    if uses_deepspeed(cfg):
        skip_cpu_shm_comm_op()  # before the config below, whose creation starts DeepSpeed's comm backend
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
    with trainer_lm_head(head_path(cfg, family)):
        if cfg.method == "sft":
            trainer = SFTTrainer(**common)
        else:
            ref_model = None
            if cfg.tuning == "full" and needs_reference_model(cfg):
                reference = cfg.dpo.reference_model or cfg.model
                ref_model = load_model(
                    reference, cfg, trust, tokenizer, family=family, deepspeed=deepspeed, zero3=zero3
                )
            trainer = DPOTrainer(ref_model=ref_model, **common)
    check_rows_end_with_stop(trainer, tokenizer, cfg)
    tolerance = cfg.lm_head_tolerance or DEFAULT_TOLERANCE[cfg.dtype]
    trainer.lm_head_probe = HeadParityProbe(trainer, tolerance=tolerance, family=family.name, rows=PROBE_ROWS,
                                            batch_size=cfg.schedule.per_device_train_batch_size)  # fmt: skip
    trainer.add_callback(trainer.lm_head_probe)
    trainer.add_callback(CheckpointRecords(trainer.lm_head_probe))
    return trainer, family, tokenizer


PROBE_ROWS = 8  # training rows the LM-head probe scores, in micro-batches of the training shape


def head_path(cfg: TrainConfig, family: Family) -> str:
    """``fused`` (trl's fused LM head) or ``own`` (the model's own forward) for this run."""
    return family.lm_head if cfg.lm_head == "auto" else cfg.lm_head


def save_atomically(dest: Path, write) -> None:
    """Call ``write(tmp_dir)`` and rename the folder onto ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    write(tmp)
    apply_umask_modes(tmp)  # mkdtemp makes it 0700, safetensors its files 0600
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)


@contextmanager
def zero3_lifted() -> Iterator[None]:
    """No DeepSpeed config registered with transformers inside: ``from_pretrained`` loads whole weights in
    this process instead of entering ``deepspeed.zero.Init`` (a collective the other ranks never join)."""
    from transformers.integrations import deepspeed as hf_deepspeed

    held = hf_deepspeed._hf_deepspeed_config_weak_ref
    hf_deepspeed._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = held


def merge_adapter(base_model: str, adapter_dir: Path, dest: Path, *, trust: bool = False, family: Family | None = None):
    """Load the base model, apply the adapter, merge it into the weights and save to ``dest`` (whole weights,
    in this process only, also after a ZeRO-3 run)."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    with zero3_lifted():
        base = load_remote_aware(base_model, trust_remote_code=trust, dtype="auto")
        merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    tokenizer = AutoTokenizer.from_pretrained(str(adapter_dir), trust_remote_code=trust)

    def write(tmp: Path) -> None:
        merged.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    save_atomically(dest, write)


def resume_point(cfg: TrainConfig, trainer, tokenizer, data_sha: str) -> Path | None:
    """The checkpoint to resume from (see :mod:`pipelines.training.checkpoints`); every rank decides on the
    same files before the main process moves stale checkpoints aside."""
    model_sha = folder_fingerprint(Path(cfg.model)) if Path(cfg.model).is_dir() else cfg.model
    template_sha = hashlib.sha256(str(tokenizer.chat_template).encode()).hexdigest()
    parts = fingerprint_parts(cfg.model_dump(), data_sha, model_sha, template_sha, world_size=trainer.args.world_size)
    try:
        plan = plan_resume(cfg.checkpoints_dir, parts, cfg.resume)
    except ResumeRefused as exc:
        raise TrainingSetupError(str(exc)) from exc
    trainer.accelerator.wait_for_everyone()
    checkpoint = apply_resume_plan(plan) if trainer.is_world_process_zero() else plan.checkpoint
    trainer.accelerator.wait_for_everyone()
    return checkpoint


def finished_at(checkpoint: Path, trainer) -> bool:
    """Whether ``checkpoint`` already holds the run's last step (``max_steps``): then its weights and state
    are loaded and no step is taken. transformers resumes into the epoch and checks ``max_steps`` only
    after a step, so a finished run relaunched (a rerun for a changed ``merge``, a deleted ``final/``)
    would train one step past ``max_steps``. Under DeepSpeed the engine that loads a checkpoint exists
    only inside ``train()``: there the step is taken, with a warning."""
    from transformers import TrainerState

    max_steps = trainer.args.max_steps
    step = checkpoint_step(checkpoint)
    if max_steps <= 0 or step < max_steps:
        return False
    if trainer.is_deepspeed_enabled:
        log.warning("%s is at step %d of max_steps %d; under DeepSpeed the resumed run takes one more step",
                    checkpoint, step, max_steps)  # fmt: skip
        return False
    trainer._load_from_checkpoint(str(checkpoint))  # the weights (adapter or full) the Trainer would resume
    trainer.state = TrainerState.load_from_json(str(checkpoint / "trainer_state.json"))
    log.info("%s already holds step %d of max_steps %d: no training step; final/ from its weights",
             checkpoint, step, max_steps)  # fmt: skip
    return True


def run_training(cfg: TrainConfig, *, report_to: str = "none", run_name: str | None = None, callbacks=None) -> dict:
    """Train (resuming when possible), evaluate, save final artefacts; returns the metrics."""
    data_sha = dataset_hash(cfg.dataset) if Path(cfg.dataset).exists() else ""
    trainer, family, tokenizer = build_trainer(cfg, report_to=report_to, run_name=run_name, callbacks=callbacks)
    checkpoint = resume_point(cfg, trainer, tokenizer, data_sha)
    resumed_from = checkpoint_step(checkpoint) if checkpoint else 0
    if checkpoint and finished_at(checkpoint, trainer):
        result = None  # the Trainer would take one more step past max_steps before checking it
    else:
        try:
            result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        except HeadParityError as exc:
            raise TrainingSetupError(str(exc)) from exc
    steps_this_run = trainer.state.global_step - resumed_from
    reported = result.metrics if result is not None else {}
    metrics: dict[str, Any] = {k: v for k, v in reported.items() if isinstance(v, (int, float))}
    history = loss_history(trainer.state.log_history)
    # HF divides the loss summed over this run's steps by the global step: rescale after a resume
    if steps_this_run > 0 and result is not None:
        train_loss = result.training_loss * trainer.state.global_step / steps_this_run
    else:
        train_loss = sum(h["loss"] for h in history) / len(history) if history else None
    metrics.update({"train_loss": train_loss, "global_step": trainer.state.global_step})
    if trainer.eval_dataset is not None:
        metrics.update({k: v for k, v in trainer.evaluate().items() if isinstance(v, (int, float))})
    metrics.update(run_metrics(history, trainer.train_dataset, trainer.eval_dataset))
    metrics["resumed_from_step"] = resumed_from
    metrics["steps_this_run"] = steps_this_run
    probe = trainer.lm_head_probe.result
    if probe is None and steps_this_run == 0:  # a relaunch that took no step keeps the record it had
        probe = saved_probe(checkpoint, cfg.reports_path / "metrics.json")
    metrics["lm_head"] = probe

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
        merge_adapter(cfg.model, cfg.final_dir, cfg.merged_dir, trust=trust, family=family)
    write_run_summary(cfg, family, metrics, history, checkpoint, data_sha, run_name)
    return metrics


__all__ = [
    "FamilyError",
    "TrainingSetupError",
    "build_trainer",
    "deepspeed_state",
    "head_path",
    "load_dtype",
    "load_model",
    "load_tokenizer",
    "merge_adapter",
    "qlora_settings",
    "run_training",
]
