"""Training presets (``configs/training/*.yaml``) as the pipeline's own train sections.

A preset file holds one run under ``train:`` (``method``, the base model and its recipe), the keys of
:class:`~pipelines.training.config.TrainConfig`. Laid over params.yaml with the profiles command, it
becomes the whole ``train.<method>`` section (the params' CPU demo values there are dropped, not
merged), with the folders of the convention filled in::

    python -m pipelines.profiles paper configs/training/ram2c_dpo_qwen1.5-4b.yaml \\
        configs/training/tagging_sft_qwen2.5-7b.yaml --write params.yaml

Everything else follows from that section: ``make_datasets`` measures the ``<method>`` dataset with its
model's tokenizer, family and ``max_length``; ``dvc.yaml`` reads its model, dataset and output folders;
``train@<method>`` writes ``models/<method>/final``, where ``evaluate`` reads the adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.config import validate_section
from pipelines.training.config import TrainConfig

# Keys a preset may leave to their defaults that params.yaml spells out (dvc.yaml interpolates them).
FILLED_KEYS = ("family", "trust_remote_code", "max_length", "dataset", "data_card", "output_dir", "reports_dir")


def is_run_section(value: Any) -> bool:
    """A mapping that describes a whole training run (it names its ``method``): it replaces, never merges."""
    return isinstance(value, Mapping) and "method" in value


def is_preset(data: Any) -> bool:
    """A preset file's content: only ``train:``, holding one run (not the ``sft``/``dpo`` sections)."""
    return isinstance(data, Mapping) and list(data) == ["train"] and is_run_section(data["train"])


def preset_section(run: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """The preset's run validated strictly (errors name ``source``), with :data:`FILLED_KEYS` spelled out."""
    cfg = validate_section(dict(run), TrainConfig, section="train", source=source)
    return {**run, **{key: getattr(cfg, key) for key in FILLED_KEYS}}


def preset_profile(data: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """A preset file as a profile: ``{"train": {<method>: <whole section>}}``."""
    section = preset_section(data["train"], source=source)
    return {"train": {section["method"]: section}}
