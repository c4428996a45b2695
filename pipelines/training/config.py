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
    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    target_modules: list[str] | None = None  # None: the family's default targets


class SFTSettings(StrictModel):
    completion_only_loss: bool = True
    packing: bool = False


class DPOSettings(StrictModel):
    beta: float = Field(default=0.1, gt=0.0)
    loss_type: DPO_LOSSES = "sigmoid"
    label_smoothing: float = Field(default=0.0, ge=0.0, lt=0.5)
    reference_model: str | None = None
    precompute_ref_log_probs: bool = False


class ScheduleSettings(StrictModel):
    max_steps: int = -1
    num_train_epochs: float = Field(default=1.0, gt=0.0)
    learning_rate: float = Field(default=2e-4, gt=0.0)
    lr_scheduler_type: Literal["linear", "cosine", "constant", "constant_with_warmup"] = "cosine"
    warmup_ratio: float = Field(default=0.03, ge=0.0, lt=1.0)
    weight_decay: float = Field(default=0.0, ge=0.0)
    max_grad_norm: float = Field(default=1.0, gt=0.0)
    per_device_train_batch_size: int = Field(default=2, ge=1)
    per_device_eval_batch_size: int = Field(default=2, ge=1)
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    gradient_checkpointing: bool = False
    optim: str = "adamw_torch"
    logging_steps: int = Field(default=1, ge=1)
    eval_steps: int | None = Field(default=None, ge=1)
    save_steps: int = Field(default=50, ge=1)
    save_total_limit: int = Field(default=2, ge=1)


class TrackingSettings(StrictModel):
    project: str = "edumas"
    group: str | None = None
    run_name: str | None = None
    report_to: Literal["wandb", "none"] = "wandb"


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
    method: Literal["sft", "dpo"]
    model: str
    family: str = "auto"
    trust_remote_code: bool | None = None
    dataset: str  # filled from convention_paths(method) when left out
    data_card: str | None = f"{DATASETS_DIR}/data_card.json"  # null: no card (nothing checked)
    output_dir: str  # filled from convention_paths(method) when left out
    tuning: Literal["lora", "qlora", "full"] = "lora"
    lora: LoraSettings = LoraSettings()
    sft: SFTSettings = SFTSettings()
    dpo: DPOSettings = DPOSettings()
    max_length: int = Field(default=1024, ge=16)
    schedule: ScheduleSettings = ScheduleSettings()
    seed: int = 42
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    # auto: the family's default (sdpa; none passed for ChatGLM3/MiniCPM remote code, see families.py)
    attn_implementation: Literal["auto", "sdpa", "eager", "flash_attention_2"] = "auto"
    deepspeed: str | None = None
    # auto: the family's head (own for ChatGLM3 and MiniCPM, trl's fused head otherwise); see lm_head.py
    lm_head: Literal["auto", "fused", "own"] = "auto"
    lm_head_tolerance: float | None = Field(default=None, gt=0.0)  # None: by dtype (head_probe.DEFAULT_TOLERANCE)
    resume: Literal["auto", "never"] = "auto"
    merge: bool = False
    reports_dir: str | None = None
    tracking: TrackingSettings = TrackingSettings()

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
