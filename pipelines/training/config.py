"""Strict configuration of one training run (``params.yaml`` ``train.sft`` / ``train.dpo``, or a preset).

Cross-field rules (each a clear config error): a LoRA/QLoRA DPO run takes its reference from the
base model with the adapter disabled, so ``dpo.reference_model`` must stay empty; ``merge`` needs
an adapter; ``packing`` applies to SFT only and needs ``flash_attention_2`` (padding-free packing:
with sdpa or eager the packed samples would attend to each other).

Folders follow one convention (:func:`convention_paths`), so a run names only its model and recipe:
base models in ``models/base/<name>``; the run of method ``<m>`` (``sft`` or ``dpo``) reads
``data/train/<m>`` and ``data/train/data_card.json`` and writes ``models/<m>/{checkpoints,final,merged}``
and ``reports/train/<m>``. A key left out (or null) takes its conventional value; params.yaml and
the sections a preset writes there (:mod:`pipelines.training.presets`) spell them out for ``dvc.yaml``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from pipelines.config import StrictModel

DPO_LOSSES = Literal["sigmoid", "hinge", "ipo", "robust", "bco_pair", "sppo_hard", "nca_pair", "apo_zero", "apo_down"]


class LoraSettings(StrictModel):
    r: int = Field(default=16, ge=1, description="LoRA rank")
    alpha: int = Field(default=32, ge=1, description="LoRA scaling alpha")
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0, description="LoRA dropout")
    target_modules: list[str] | None = Field(
        None,
        description="null = the family's targets (q/k/v/o/gate/up/down_proj; query_key_value for ChatGLM3)",
    )


class SFTSettings(StrictModel):
    completion_only_loss: bool = Field(
        True,
        description="loss only on the assistant completion, not on system/user tokens",
    )
    packing: bool = Field(False, description="pack several short rows into one max_length sequence (SFT only)")


class DPOSettings(StrictModel):
    beta: float = Field(default=0.1, gt=0.0, description="DPO temperature: higher = stay closer to the reference")
    loss_type: DPO_LOSSES = Field(
        "sigmoid",
        description="sigmoid (DPO) | ipo | hinge | robust | bco_pair | sppo_hard | nca_pair | apo_zero | apo_down",
    )
    label_smoothing: float = Field(
        default=0.0, ge=0.0, lt=0.5,
        description="conservative / robust DPO smoothing in [0, 0.5)",
    )
    reference_model: str | None = Field(
        None,
        description="full tuning only: frozen reference folder (null = the base model); LoRA uses the base with the "
        "adapter disabled",
    )
    precompute_ref_log_probs: bool = Field(
        False,
        description="compute reference log-probs once before training (frees the reference model)",
    )


class ScheduleSettings(StrictModel):
    max_steps: int = Field(-1, description="> 0 overrides num_train_epochs; -1: train num_train_epochs")
    num_train_epochs: float = Field(default=1.0, gt=0.0, description="epochs when max_steps is -1")
    learning_rate: float = Field(default=2e-4, gt=0.0, description="peak learning rate")
    lr_scheduler_type: Literal["linear", "cosine", "constant", "constant_with_warmup"] = Field(
        "cosine",
        description="linear | cosine | constant | constant_with_warmup",
    )
    warmup_ratio: float = Field(default=0.03, ge=0.0, lt=1.0, description="share of steps for linear warmup")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay")
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="gradient clipping")
    per_device_train_batch_size: int = Field(default=2, ge=1, description="micro-batch per device (DPO: pairs)")
    per_device_eval_batch_size: int = Field(default=2, ge=1, description="eval micro-batch per device")
    gradient_accumulation_steps: int = Field(
        default=1, ge=1,
        description="effective batch = micro-batch x devices x this",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="trade compute for activation memory (on for the GPU presets)",
    )
    optim: str = Field("adamw_torch", description="any transformers optimizer name (paged_adamw_8bit for QLoRA)")
    logging_steps: int = Field(default=1, ge=1, description="log loss every N steps (reports/train/<method>/loss.csv)")
    eval_steps: int | None = Field(
        default=None, ge=1,
        description="evaluate every N steps; null = only once at the end (when an eval split exists)",
    )
    save_steps: int = Field(default=50, ge=1, description="checkpoint every N steps (resume point after a kill)")
    save_total_limit: int = Field(default=2, ge=1, description="keep the newest N checkpoints")


class TrackingSettings(StrictModel):
    project: str = Field("edumas", description="W&B project")
    group: str | None = Field(None, description="W&B group (null = DVC_EXP_NAME when set)")
    run_name: str | None = Field(
        None,
        description="W&B run name (null = <method>-<tuning>-<model folder>); -<DVC_EXP_NAME> is appended",
    )
    report_to: Literal["wandb", "none"] = Field(
        "wandb",
        description="wandb | none; offline unless WANDB_API_KEY/WANDB_MODE; EDUMAS_TRACKING=0 turns it off",
    )


BASE_MODELS_DIR = "models/base"  # base model folders: models/base/<name> (prepare_models, or downloaded there)
DATASETS_DIR = "data/train"  # make_datasets.output_dir: <DATASETS_DIR>/<method>, <DATASETS_DIR>/data_card.json


def convention_paths(method: str) -> dict[str, str]:
    """Where the run of ``method`` reads its dataset and writes its model and reports."""
    return {
        "dataset": f"{DATASETS_DIR}/{method}",
        "data_card": f"{DATASETS_DIR}/data_card.json",
        "output_dir": f"models/{method}",
        "reports_dir": f"reports/train/{method}",
    }


class TrainConfig(StrictModel):
    method: Literal["sft", "dpo"] = Field(description="sft (trl SFTTrainer) | dpo (trl DPOTrainer)")
    model: str = Field(description="local base model folder models/base/<name> (nothing is downloaded at run time)")
    family: str = Field(
        "auto",
        description="auto | qwen2 | llama | minicpm | chatglm3; must agree with config.model_type",
    )
    trust_remote_code: bool | None = Field(
        None,
        description="null = the family's default (true for MiniCPM and ChatGLM3)",
    )
    dataset: str = Field(
        description="make_datasets output this run trains on (left out: data/train/<method>)",
    )
    data_card: str | None = Field(
        f"{DATASETS_DIR}/data_card.json",
        description="copied (hashes, counts, demo inputs) into the model card; null: no card (nothing checked)",
    )
    output_dir: str = Field(
        description="checkpoints/ (kept: not a DVC out), final/ (adapter or weights + tokenizer + model card), merged/ "
        "(left out: models/<method>)",
    )
    tuning: Literal["lora", "qlora", "full"] = Field(
        "lora",
        description="lora | qlora (4-bit NF4, CUDA + bitsandbytes) | full",
    )
    lora: LoraSettings = Field(LoraSettings(), description="LoRA settings (tuning lora or qlora)")
    sft: SFTSettings = Field(SFTSettings(), description="settings of method sft")
    dpo: DPOSettings = Field(DPOSettings(), description="settings of method dpo")
    max_length: int = Field(
        default=1024, ge=16,
        description="max tokens per training sequence (prompt + completion), and make_datasets' length filter of "
        "its dataset; tagging SFT rows are 420-460 tokens",
    )
    schedule: ScheduleSettings = Field(
        ScheduleSettings(),
        description="optimisation schedule, batch sizes, logging and checkpoints",
    )
    seed: int = Field(42, description="model init / data order / dropout seed")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        description="float32 (CPU) | bfloat16 (A100/H100) | float16",
    )
    # auto: the family's default (sdpa; none passed for ChatGLM3/MiniCPM remote code, see families.py)
    attn_implementation: Literal["auto", "sdpa", "eager", "flash_attention_2"] = Field(
        "auto",
        description="auto = the family's (sdpa; none for ChatGLM3/MiniCPM remote code) | sdpa | eager | "
        "flash_attention_2",
    )
    deepspeed: str | None = Field(
        None,
        description="optional DeepSpeed JSON passed to the Trainer; with accelerate launch the accelerate config "
        "supplies it",
    )
    # auto: the family's head (own for ChatGLM3 and MiniCPM, trl's fused head otherwise); see lm_head.py
    lm_head: Literal["auto", "fused", "own"] = Field(
        "auto",
        description="auto = the family's (own for ChatGLM3/MiniCPM, trl's fused otherwise) | fused | own; checked "
        "at step 1",
    )
    lm_head_tolerance: float | None = Field(
        default=None, gt=0.0,
        description="max mean |Δ log p| between the trainer's head and the plain forward (any one token: 20x); null "
        "= 1e-3 (fp32), 5e-2 (bf16/fp16)",
    )
    resume: Literal["auto", "never"] = Field(
        "auto",
        description="auto = continue from the last checkpoint of the same run; never = from step 0 (old checkpoints "
        "moved to checkpoints/superseded/)",
    )
    merge: bool = Field(False, description="also write merged full weights to <output_dir>/merged (LoRA/QLoRA only)")
    reports_dir: str | None = Field(None, description="metrics.json, loss.csv, loss.png")
    tracking: TrackingSettings = Field(TrackingSettings(), description="W&B tracking of the run")

    @model_validator(mode="before")
    @classmethod
    def _conventional_folders(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("method") in ("sft", "dpo"):
            paths = convention_paths(data["method"])  # data_card: null (set) means no card, so only when absent
            filled = {k: v for k, v in paths.items() if (k not in data if k == "data_card" else data.get(k) is None)}
            data = {**data, **filled}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.tuning in ("lora", "qlora") and self.dpo.reference_model:
            raise ValueError(
                f"dpo.reference_model is set but tuning is {self.tuning}: the reference is the base model with the "
                "adapter disabled; remove dpo.reference_model or use tuning: full"
            )
        if self.merge and self.tuning == "full":
            raise ValueError("merge: true needs tuning lora or qlora (full tuning already saves whole weights)")
        if self.method == "dpo" and self.sft.packing:
            raise ValueError("sft.packing applies to method sft only; set it to false for dpo")
        if self.sft.packing and self.method == "sft" and self.attn_implementation != "flash_attention_2":
            raise ValueError(
                f"sft.packing with attn_implementation {self.attn_implementation!r} lets packed samples attend to "
                "each other; set attn_implementation: flash_attention_2 (padding-free packing, needs flash-attn) "
                "or sft.packing: false"
            )
        return self

    @property
    def checkpoints_dir(self) -> Path:
        return Path(self.output_dir) / "checkpoints"

    @property
    def final_dir(self) -> Path:
        return Path(self.output_dir) / "final"

    @property
    def merged_dir(self) -> Path:
        return Path(self.output_dir) / "merged"

    @property
    def reports_path(self) -> Path:
        return Path(self.reports_dir or f"reports/train/{self.method}")


def tracking_names(cfg: TrainConfig, env: dict[str, str] | None = None) -> dict[str, str | None]:
    """W&B project, group and run name: params first, then ``DVC_EXP_NAME`` (group, and a name suffix)."""
    env = dict(os.environ) if env is None else env
    experiment = env.get("DVC_EXP_NAME") or None
    name = cfg.tracking.run_name or f"{cfg.method}-{cfg.tuning}-{Path(cfg.model).name}"
    if experiment:
        name = f"{name}-{experiment}"
    return {"project": cfg.tracking.project, "group": cfg.tracking.group or experiment, "name": name}
