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

    require_no_failures: bool = Field(
        True,
        description="SFT rows only from right verdicts without any failed sub-task (its target would show a No the "
        "team never reasoned); one row per pair (definition + question -> reasoned verdict); agents' own steps are "
        "not exported",
    )


class OutputsConfig(GenerationOutputs):
    """The one place the stage's output folders are named (dvc.yaml lists the files in them)."""

    generated_dir: str = Field(
        "data/generated/tagging",
        description="predictions.jsonl, traces.jsonl, sft.jsonl (shards/I-of-N/ under it with --shard)",
    )
    reports_dir: str = Field(
        "reports/generate_tagging", description="metrics.json, usage.json, failures.json, tables and plots"
    )


class TaggingConfig(GenerationConfig):
    ROLES: ClassVar[tuple[str, ...]] = ROLES
    data: TaggingDataConfig = Field(
        TaggingDataConfig(),
        description="the labelled (definition, question, label) file and which rows are evaluated",
    )
    split: SplitConfig = Field(
        SplitConfig(),
        description="generation split vs held-out evaluation split (recorded in split.json)",
    )
    demos: DemoConfig = Field(DemoConfig(), description="demonstrations, from the generation split only")
    systems: list[System] = Field(
        default_factory=lambda: ["team", "single_llm", "embedding", "plm"], min_length=1,
        description="columns of the Table-4-style table; any subset",
    )
    failure_outcome: Literal["wrong", "no", "omit"] = Field(
        "wrong",
        description="a failed sample (crashed, unparsed, verdict hanging on a failed sub-task): wrong | \"no\" "
        "(predicted No) | omit (left out); coverage is reported beside",
    )
    size: SizeName = Field(
        "Base",
        description="Table 4's \"Model size\" row that llm.default fills (the paper: Base or Large)",
    )
    sizes: dict[SizeName, BackendConfig] = Field(
        {},
        description="more rows: the LLM systems (team, single_llm) again on the evaluation split with another "
        "backend as llm.default (llm.roles kept), e.g. {Large: {kind: openai, model: Llama-3-70B-Instruct, "
        "base_urls: [...]}}",
    )
    team: TeamConfig = Field(
        TeamConfig(),
        description="the multi-agent team: planner, solver, semantic and numerical judges",
    )
    embedding: EmbeddingBaselineConfig = Field(
        EmbeddingBaselineConfig(),
        description="the embedding-similarity baseline",
    )
    plm: PLMBaselineConfig = Field(PLMBaselineConfig(), description="the fine-tuned encoder (PLM) baseline")
    sft: SFTConfig = Field(SFTConfig(), description="which team verdicts become SFT rows")
    outputs: OutputsConfig = Field(OutputsConfig(), description="output folders (dvc.yaml lists the files in them)")

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
