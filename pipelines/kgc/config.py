"""The ``kgc`` section of params.yaml (stage ``generate_kgc``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from pipelines.agents.generation import GenerationConfig
from pipelines.agents.outputs import GenerationOutputs
from pipelines.config import StrictModel, distinct
from pipelines.kgc.datasets import DatasetConfig
from pipelines.kgc.team import TeamConfig
from pipelines.retrieval.config import EmbedderConfig

Method = Literal["cooperkgc", "autokg", "chatie", "coter", "self_consistency"]
ROLES = ("ner_expert", "re_expert", "ee_expert", "autokg", "chatie", "coter", "self_consistency")
"""The LLM roles of the KGC systems (``llm.roles`` may name only these)."""


class SelfConsistencyConfig(StrictModel):
    """k samples of one expert at ``temperature``, majority vote; ``via``: ``n`` (one request with
    n = k) or ``sample_index`` (k requests)."""

    k: int = Field(5, ge=1, description="samples of one expert per sentence")
    temperature: float = Field(0.7, gt=0.0, le=2.0, description="sampling temperature of the samples")
    via: Literal["n", "sample_index"] = Field("n", description="n: one request with n = k | sample_index: k requests")


class SFTConfig(StrictModel):
    """SFT rows from the team's final answers (sentence + task -> extraction in the output mode's
    format), of the first ``shots`` entry (see :mod:`pipelines.kgc.sft`): ``keep: correct`` keeps
    an answer's extractions that match gold (a row when one does), ``answer`` the whole answer;
    both only for sentences whose final answer scores at least ``min_f1``."""

    keep: Literal["correct", "answer"] = Field(
        "correct",
        description="answer: the team's whole final answer | correct: only the extractions that match gold (a row "
        "when one does: never a wrong target)",
    )
    min_f1: float = Field(
        0.0, ge=0.0, le=1.0,
        description="and only sentences whose final answer scores at least this F1 (0: any)",
    )


class OutputsConfig(GenerationOutputs):
    """The one place the stage's output folders are named (dvc.yaml lists the files in them)."""

    generated_dir: str = Field(
        "data/generated/kgc",
        description="predictions.jsonl, traces.jsonl, sft.jsonl (shards/I-of-N/ under it with --shard)",
    )
    reports_dir: str = Field(
        "reports/generate_kgc", description="metrics.json, usage.json, failures.json, tables and plots"
    )


class KGCConfig(GenerationConfig):
    ROLES: ClassVar[tuple[str, ...]] = ROLES
    datasets: list[DatasetConfig] = Field(
        min_length=1,
        description="datasets scored, one per file set in an official format; files read when all exist, else "
        "fallback_files",
    )
    systems: list[Method] = Field(
        default_factory=lambda: ["cooperkgc", "autokg"], min_length=1,
        description="rows of the Table-2-style table: cooperkgc | autokg | chatie | coter | self_consistency",
    )
    shots: list[int] = Field(
        default_factory=lambda: [0], min_length=1,
        description="each system at each K (K-shot demonstrations by embedding distance), e.g. [0, 1] as in Table 2",
    )
    spans: Literal["sentence", "free"] = Field(
        "sentence",
        description="json mode: every span is one of the sentence's own substrings (an enum per call; grounded "
        "decoding) | free: any string of up to team.bounds span_chars",
    )
    team: TeamConfig = Field(
        TeamConfig(),
        description="the CooperKGC team: members, rounds, demonstrations, answer bounds",
    )
    self_consistency: SelfConsistencyConfig = Field(
        SelfConsistencyConfig(),
        description="k samples of one expert, majority vote; via n (one request) | sample_index",
    )
    embedder: EmbedderConfig = Field(
        EmbedderConfig(),
        description="sentence embeddings for K-shot demonstrations (only loaded when shots > 0)",
    )
    demo_cache: str = Field(
        "",
        description="folder of demonstration-pool vectors shared by runs and shards (relative: to the project root; "
        "empty: $XDG_CACHE_HOME/edumas/kgc-demos, else ~/.cache/edumas/kgc-demos)",
    )
    sft: SFTConfig = Field(SFTConfig(), description="rows: the scored expert's round-0 prompt -> its final extractions")
    outputs: OutputsConfig = Field(OutputsConfig(), description="output folders (dvc.yaml lists the files in them)")

    @field_validator("shots")
    @classmethod
    def _shots(cls, shots: list[int]) -> list[int]:
        if any(k < 0 for k in shots) or len(set(shots)) != len(shots):
            raise ValueError("shots must be distinct numbers >= 0, e.g. [0, 1]")
        return shots

    @field_validator("datasets")
    @classmethod
    def _names(cls, datasets: list[DatasetConfig]) -> list[DatasetConfig]:
        distinct("dataset names", [d.name for d in datasets])
        return datasets
