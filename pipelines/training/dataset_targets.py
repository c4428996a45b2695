"""What each dataset is built for: the train section it feeds, and from it the tokenizer, family and
``max_length`` its rows are measured with.

``make_datasets.targets`` names the section per kind (``sft: train.sft``, ``dpo: train.dpo``); the SFT
and DPO datasets can so serve runs on different models (an SFT preset on Qwen2.5-7B, a DPO preset on
Qwen1.5-4B). The section must read the dataset this stage writes (``<output_dir>/<kind>`` and its data
card): a mismatch is a config error saying which key to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from pipelines.config import ConfigError, StrictModel, load_section
from pipelines.training.config import TrainConfig


class DatasetTarget(StrictModel):
    """The model a dataset is measured for (a train section's ``model``, ``family``, ``max_length``)."""

    tokenizer: str
    family: str = "auto"
    trust_remote_code: bool | None = None
    max_length: int = Field(default=1024, ge=16)
    section: str | None = None  # the params section it was taken from (the data card says so)


def model_targets(model: str, *, kinds: tuple[str, ...] = ("sft", "dpo"), **settings: Any) -> dict[str, DatasetTarget]:
    """The same target for every kind: one model's tokenizer (tests, one-model callers)."""
    return {kind: DatasetTarget(tokenizer=model, **settings) for kind in kinds}


def target_of(cfg: TrainConfig, section: str) -> DatasetTarget:
    return DatasetTarget(
        tokenizer=cfg.model,
        family=cfg.family,
        trust_remote_code=cfg.trust_remote_code,
        max_length=cfg.max_length,
        section=section,
    )


def targets_from_params(
    targets: Mapping[str, str], params_path: Path | str, *, output_dir: str
) -> dict[str, DatasetTarget]:
    """The target of each kind from its train section in ``params_path``, checked against this stage's outputs."""
    found = {}
    for kind, section in targets.items():
        cfg = load_section(section, TrainConfig, params_path)
        where = f"make_datasets.targets.{kind} names {section}"
        if cfg.method != kind:
            raise ConfigError(
                f"{params_path}: {where}, a {cfg.method} run; the {kind} dataset feeds a {kind} run: name a "
                f"train section with method {kind}"
            )
        expected = {"dataset": str(Path(output_dir) / kind), "data_card": str(Path(output_dir) / "data_card.json")}
        for key, path in expected.items():
            value = getattr(cfg, key)
            if value is not None and Path(value) != Path(path):
                raise ConfigError(
                    f"{params_path}: {where}, whose {key} is {value}, but make_datasets writes {path}; set "
                    f"{section}.{key}: {path} (or make_datasets.output_dir to its folder)"
                )
        found[kind] = target_of(cfg, section)
    return found
