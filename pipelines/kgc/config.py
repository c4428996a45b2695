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

    k: int = Field(5, ge=1)
    temperature: float = Field(0.7, gt=0.0, le=2.0)
    via: Literal["n", "sample_index"] = "n"


class SFTConfig(StrictModel):
    """SFT rows from the team's final answers (sentence + task -> extraction in the output mode's
    format), of the first ``shots`` entry (see :mod:`pipelines.kgc.sft`): ``keep: correct`` keeps
    an answer's extractions that match gold (a row when one does), ``answer`` the whole answer;
    both only for sentences whose final answer scores at least ``min_f1``."""

    keep: Literal["correct", "answer"] = "correct"
    min_f1: float = Field(0.0, ge=0.0, le=1.0)


class OutputsConfig(GenerationOutputs):
    """The one place the stage's output folders are named (dvc.yaml lists the files in them)."""

    generated_dir: str = "data/generated/kgc"
    reports_dir: str = "reports/generate_kgc"


class KGCConfig(GenerationConfig):
    ROLES: ClassVar[tuple[str, ...]] = ROLES
    datasets: list[DatasetConfig] = Field(min_length=1)
    systems: list[Method] = Field(default_factory=lambda: ["cooperkgc", "autokg"], min_length=1)
    shots: list[int] = Field(default_factory=lambda: [0], min_length=1)
    spans: Literal["sentence", "free"] = "sentence"  # json mode: spans limited to the sentence's substrings
    team: TeamConfig = TeamConfig()
    self_consistency: SelfConsistencyConfig = SelfConsistencyConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    # folder of demonstration-pool vectors shared by runs and shards (relative: to the project root;
    # "": $XDG_CACHE_HOME/edumas/kgc-demos, else ~/.cache/edumas/kgc-demos)
    demo_cache: str = ""
    sft: SFTConfig = SFTConfig()
    outputs: OutputsConfig = OutputsConfig()

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
