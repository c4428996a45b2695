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

    resamples: int = Field(1000, ge=1, description="bootstrap resamples")
    seed: int = Field(0, description="bootstrap seed")
    confidence: float = Field(0.95, gt=0.0, lt=1.0, description="interval coverage")
    min_items: int = Field(
        8, ge=1,
        description="fewer items than this (a delta, or an HTS cell's scored items): no interval, the tables print "
        "\"n too small\"",
    )


class TunedRoles(StrictModel):
    """The roles the model under test plays; ``tuned_backend`` (a served fine-tune, e.g. an
    ``openai`` endpoint) replaces ``base + adapter`` in them when set."""

    roles: list[str] = Field(
        min_length=1,
        description="team roles on base + adapter (the others stay on the base model)",
    )
    tuned_backend: BackendConfig | None = Field(
        None,
        description="a served fine-tune instead of base + adapter, e.g. {kind: openai, model: my-sft, base_urls: "
        "[http://localhost:8000/v1]}",
    )

    @field_validator("roles")
    @classmethod
    def _distinct(cls, roles: list[str]) -> list[str]:
        return distinct("roles", roles)


class TaggingEvalConfig(TunedRoles):
    """The tagging team on ``items`` pairs of the evaluation split (seeded by ``tagging.data.seed``;
    null: the whole split)."""

    roles: list[str] = Field(
        default_factory=lambda: ["planner", "solver", "semantic_judge", "numerical_judge"], min_length=1,
        description="team roles on base + adapter (the others stay on the base model)",
    )
    items: int | None = Field(
        4, ge=1,
        description="held-out pairs of the evaluation split (seeded by tagging.data.seed); = tagging.data.limit, so "
        "the base arm repeats generation's requests (cache hits); null = all",
    )

    @field_validator("roles")
    @classmethod
    def _tagging_roles(cls, roles: list[str]) -> list[str]:
        return known_roles(roles, TAGGING_ROLES)


class KGCEvalConfig(TunedRoles):
    """CooperKGC (0-shot) on ``items`` sentences per dataset drawn with ``seed`` from the sentences
    that gave no SFT row (null: each ``kgc.datasets`` entry's own ``sample`` / ``seed``)."""

    roles: list[str] = Field(
        default_factory=lambda: ["ner_expert", "re_expert", "ee_expert"], min_length=1,
        description="expert roles on base + adapter",
    )
    items: int | None = Field(
        None, ge=1,
        description="sentences per dataset; null = each kgc.datasets entry's sample; sentences that gave an SFT row "
        "are never drawn",
    )
    seed: int | None = Field(
        None,
        description="sample seed; null = each dataset's seed (with no SFT row excluded: generation's sentences, "
        "cache hits)",
    )
    datasets: list[str] | None = Field(
        None, min_length=1,
        description="names of the kgc.datasets entries evaluated; null = every entry with evaluate: true (the others "
        "are read for their schemas only)",
    )

    @field_validator("roles")
    @classmethod
    def _kgc_roles(cls, roles: list[str]) -> list[str]:
        return known_roles(roles, KGC_ROLES)


class EvaluateOutputs(StrictModel):
    """``traces_dir/<system>/{base,tuned}/`` (traces, predictions, usage) and ``reports_dir``
    (metrics.json, tables.md)."""

    traces_dir: str = Field(
        "data/evaluate",
        description="<system>/{base,tuned}/ traces and predictions; tutoring/{prompts.jsonl, replies/<system>/, "
        "comparisons/<system>_vs_<baseline>/}",
    )
    reports_dir: str = Field("reports/evaluate", description="metrics.json (dvc metrics) and tables.md")


class EvaluateConfig(StrictModel):
    systems: list[SystemName] = Field(
        default_factory=lambda: list(SYSTEMS), min_length=1,
        description="systems measured (any subset); each takes its base setup (data, prompts, sampling, base model) "
        "from its generate section: tagging | kgc | ram2c",
    )
    sft_adapter: str = Field(
        "models/sft/final",
        description="SFT adapter (train@sft), loaded on the roles' own backend (transformers merges it; vLLM "
        "applies it per request)",
    )
    dpo_adapter: str = Field("models/dpo/final", description="DPO adapter (train@dpo) of the tutoring responder")
    data_card: str = Field(
        "data/train/data_card.json",
        description="make_datasets' data card: the DPO eval split must have the size it records",
    )
    sft_dataset: str = Field(
        "data/train/sft",
        description="make_datasets' SFT rows (both splits): their tagging pairs and KGC sentences are never "
        "evaluated",
    )
    tagging: TaggingEvalConfig = Field(TaggingEvalConfig(), description="the SFT adapter as the tagging team's agents")
    kgc: KGCEvalConfig = Field(
        KGCEvalConfig(),
        description="the SFT adapter as the CooperKGC experts (0-shot, kgc.team.rounds rounds)",
    )
    tutoring: TutoringEvalConfig = Field(
        TutoringEvalConfig(),
        description="RAM2C Tables 1-3: systems answer the same held-out prompts, comparisons judged pairwise (HTS)",
    )
    bootstrap: BootstrapConfig = Field(
        BootstrapConfig(),
        description="paired percentile bootstrap of every tuned - base delta (items resampled)",
    )
    outputs: EvaluateOutputs = Field(
        EvaluateOutputs(),
        description="where evaluate writes its traces and reports (dvc.yaml lists the same paths)",
    )
    progress: bool = Field(True, description="tqdm progress bars")

    @field_validator("systems")
    @classmethod
    def _distinct_systems(cls, systems: list[str]) -> list[str]:
        return distinct("systems", systems)
