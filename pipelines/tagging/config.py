"""The ``tagging`` section of params.yaml (stage ``generate@tagging``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipelines.config import StrictModel
from pipelines.llm.config import LLMConfig
from pipelines.tagging.baselines.embedding import EmbeddingBaselineConfig
from pipelines.tagging.baselines.plm import PLMBaselineConfig
from pipelines.tagging.data import DemoConfig, TaggingDataConfig
from pipelines.tagging.team import TeamConfig

System = Literal["team", "single_llm", "embedding", "plm"]


class SFTConfig(StrictModel):
    """Which team traces become SFT rows: the final verdict must be right; optionally also free
    of failed sub-tasks."""

    require_no_failures: bool = True


class OutputsConfig(StrictModel):
    generated_dir: str = "data/generated/tagging"
    reports_dir: str = "reports/generate_tagging"


class TaggingConfig(StrictModel):
    data: TaggingDataConfig = TaggingDataConfig()
    demos: DemoConfig = DemoConfig()
    systems: list[System] = Field(default_factory=lambda: ["team", "single_llm", "embedding", "plm"], min_length=1)
    concurrency: int = Field(16, ge=1)
    llm: LLMConfig
    team: TeamConfig = TeamConfig()
    embedding: EmbeddingBaselineConfig = EmbeddingBaselineConfig()
    plm: PLMBaselineConfig = PLMBaselineConfig()
    sft: SFTConfig = SFTConfig()
    outputs: OutputsConfig = OutputsConfig()
    progress: bool = True
