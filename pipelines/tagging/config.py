"""The ``tagging`` section of params.yaml (stage ``generate_tagging``)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from pipelines.agents.generation import GenerationConfig
from pipelines.agents.outputs import GenerationOutputs
from pipelines.config import StrictModel
from pipelines.llm.config import BackendConfig
from pipelines.tagging.baselines.embedding import EmbeddingBaselineConfig
from pipelines.tagging.baselines.plm import PLMBaselineConfig
from pipelines.tagging.data import TaggingDataConfig
from pipelines.tagging.split import DemoConfig, SplitConfig
from pipelines.tagging.team import TeamConfig

System = Literal["team", "single_llm", "embedding", "plm"]
SizeName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")]
ROLES = ("planner", "solver", "semantic_judge", "numerical_judge", "single_llm")
"""The tagging team's LLM roles (``llm.roles`` may name only these)."""


class SFTConfig(StrictModel):
    """Which team traces become SFT rows: the final verdict must be right; optionally also free
    of failed sub-tasks."""

    require_no_failures: bool = True


class OutputsConfig(GenerationOutputs):
    """The one place the stage's output folders are named (dvc.yaml lists the files in them)."""

    generated_dir: str = "data/generated/tagging"
    reports_dir: str = "reports/generate_tagging"


class TaggingConfig(GenerationConfig):
    ROLES: ClassVar[tuple[str, ...]] = ROLES
    data: TaggingDataConfig = TaggingDataConfig()
    split: SplitConfig = SplitConfig()
    demos: DemoConfig = DemoConfig()
    systems: list[System] = Field(default_factory=lambda: ["team", "single_llm", "embedding", "plm"], min_length=1)
    failure_outcome: Literal["wrong", "no", "omit"] = "wrong"  # how a failed sample is scored
    size: SizeName = "Base"  # the Table 4 row ("Model size") that llm.default fills: the paper's Base or Large
    sizes: dict[SizeName, BackendConfig] = {}  # more rows: the LLM systems again with this backend as llm.default
    team: TeamConfig = TeamConfig()
    embedding: EmbeddingBaselineConfig = EmbeddingBaselineConfig()
    plm: PLMBaselineConfig = PLMBaselineConfig()
    sft: SFTConfig = SFTConfig()
    outputs: OutputsConfig = OutputsConfig()

    @field_validator("failure_outcome", mode="before")
    @classmethod
    def _yaml_no(cls, value):
        """YAML 1.1 reads an unquoted ``no`` as false; take it as the ``"no"`` outcome."""
        return "no" if value is False else value

    @model_validator(mode="after")
    def _sizes(self) -> TaggingConfig:
        if self.size in self.sizes:
            raise ValueError(f"tagging.sizes names {self.size!r}, the row of llm.default (tagging.size); rename one")
        if self.sizes and not any(s in self.systems for s in ("team", "single_llm")):
            raise ValueError("tagging.sizes runs the LLM systems on more backbones; add team or single_llm to systems")
        return self
