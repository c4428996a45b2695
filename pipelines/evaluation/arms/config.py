"""The ``evaluate`` section of params.yaml (stage ``evaluate``): which systems measure the tuned
models, on how many held-out items, in which roles, and how the comparison is bootstrapped.

The base model and everything else of a system (data, prompts, sampling, output mode) come from
that system's own generate section (``tagging``, ``kgc``, ``ram2c``), so the base run asks the
same requests as generation and the shared request cache answers them. The tuned run is the
same with the roles below on ``base + adapter`` (or on ``tuned_backend``: a served fine-tune).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from pipelines.config import StrictModel, distinct
from pipelines.evaluation.arms.tutoring_config import TutoringEvalConfig
from pipelines.kgc.config import ROLES as KGC_ROLES
from pipelines.llm.config import BackendConfig
from pipelines.tagging.config import ROLES as TAGGING_ROLES

SystemName = Literal["tagging", "kgc", "tutoring"]
SYSTEMS: tuple[str, ...] = ("tagging", "kgc", "tutoring")


def known_roles(roles: list[str], valid: tuple[str, ...]) -> list[str]:
    """``roles`` when each is one of the system's LLM roles ``valid``; ValueError naming them otherwise."""
    unknown = [r for r in roles if r not in valid]
    if unknown:
        raise ValueError(f"unknown role(s) {unknown}; this system's roles: {', '.join(valid)}")
    return roles


class BootstrapConfig(StrictModel):
    """Seeded paired percentile bootstrap of every tuned-vs-base delta; below ``min_items`` items
    (also each HTS cell's scored items) no interval is computed: the tables print "n too small"."""

    resamples: int = Field(1000, ge=1)
    seed: int = 0
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    min_items: int = Field(8, ge=1)


class TunedRoles(StrictModel):
    """The roles the model under test plays; ``tuned_backend`` (a served fine-tune, e.g. an
    ``openai`` endpoint) replaces ``base + adapter`` in them when set."""

    roles: list[str] = Field(min_length=1)
    tuned_backend: BackendConfig | None = None

    @field_validator("roles")
    @classmethod
    def _distinct(cls, roles: list[str]) -> list[str]:
        return distinct("roles", roles)


class TaggingEvalConfig(TunedRoles):
    """The tagging team on ``items`` pairs of the evaluation split (seeded by ``tagging.data.seed``;
    null: the whole split)."""

    roles: list[str] = Field(
        default_factory=lambda: ["planner", "solver", "semantic_judge", "numerical_judge"], min_length=1
    )
    items: int | None = Field(4, ge=1)

    @field_validator("roles")
    @classmethod
    def _tagging_roles(cls, roles: list[str]) -> list[str]:
        return known_roles(roles, TAGGING_ROLES)


class KGCEvalConfig(TunedRoles):
    """CooperKGC (0-shot) on ``items`` sentences per dataset drawn with ``seed`` from the sentences
    that gave no SFT row (null: each ``kgc.datasets`` entry's own ``sample`` / ``seed``)."""

    roles: list[str] = Field(default_factory=lambda: ["ner_expert", "re_expert", "ee_expert"], min_length=1)
    items: int | None = Field(None, ge=1)
    seed: int | None = None

    @field_validator("roles")
    @classmethod
    def _kgc_roles(cls, roles: list[str]) -> list[str]:
        return known_roles(roles, KGC_ROLES)


class EvaluateOutputs(StrictModel):
    """``traces_dir/<system>/{base,tuned}/`` (traces, predictions, usage) and ``reports_dir``
    (metrics.json, tables.md)."""

    traces_dir: str = "data/evaluate"
    reports_dir: str = "reports/evaluate"


class EvaluateConfig(StrictModel):
    systems: list[SystemName] = Field(default_factory=lambda: list(SYSTEMS), min_length=1)
    sft_adapter: str = "models/sft/final"
    dpo_adapter: str = "models/dpo/final"
    data_card: str = "data/train/data_card.json"
    sft_dataset: str = "data/train/sft"
    tagging: TaggingEvalConfig = TaggingEvalConfig()
    kgc: KGCEvalConfig = KGCEvalConfig()
    tutoring: TutoringEvalConfig = TutoringEvalConfig()
    bootstrap: BootstrapConfig = BootstrapConfig()
    outputs: EvaluateOutputs = EvaluateOutputs()
    progress: bool = True

    @field_validator("systems")
    @classmethod
    def _distinct_systems(cls, systems: list[str]) -> list[str]:
        return distinct("systems", systems)
