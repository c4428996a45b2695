"""The ``ram2c`` section of params.yaml (stage ``generate_ram2c``): scenario, topics, students,
the T/P/E expert groups, group reflection, ablations, quality gates and outputs.

The knowledge bases come from the ``build_kb`` section (store, embedder) and the ``retrieval``
section (which kinds each retrieval group reads); a group here names its retrieval group.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from pipelines.agents.generation import GenerationConfig
from pipelines.agents.outputs import GenerationOutputs
from pipelines.config import StrictModel
from pipelines.ram2c.scenario import load_scenario

Language = Literal["en", "zh"]
Level = Literal["recall", "understanding", "analysis", "evaluation", "creation"]
GroupName = Literal["T", "P", "E"]
Role = Literal[
    "topic_writer", "student", "drafter", "ballot", "voter", "analyst", "reviser", "analyst_reviser", "synthesizer"
]
LEVELS: tuple[str, ...] = ("recall", "understanding", "analysis", "evaluation", "creation")


class SourceConfig(StrictModel):
    """A book in one language: ``path`` when it exists, else ``fallback`` (the project's own text).

    Chapters are found by ``CHAPTER <n>`` / ``第<n>章`` headings; ``chapters`` picks some of ``path``
    (1-based, null = all; the fallback gives all its chapters); each chapter gives
    ``passages_per_chapter`` passages of about ``passage_chars`` characters.
    """

    language: Language = Field(description="en | zh: this book's language (ram2c.language picks the source)")
    path: str = Field(
        description="the book's text file, read in place when present (e.g. "
        "../shared/data/tutoring/robinson_crusoe.txt)",
    )
    fallback: str | None = Field(None, description="read when path is missing (e.g. the project's own story)")
    chapters: list[int] | None = Field(
        None,
        description="chapters of `path` (1-based; null = all; the fallback gives all of its own)",
    )
    passages_per_chapter: int = Field(1, ge=1, description="passages spread over each chapter")
    passage_chars: int = Field(700, ge=100, description="about this many characters per passage (whole paragraphs)")


def _default_sources() -> list[SourceConfig]:
    return [
        SourceConfig(
            language="en",
            path="../shared/data/tutoring/robinson_crusoe.txt",
            fallback="data/ram2c/lighthouse.en.txt",
            chapters=[1, 4, 5],
        ),
        SourceConfig(language="zh", path="data/ram2c/lighthouse.zh.txt", fallback=None),
    ]


class TopicConfig(StrictModel):
    """Discussion questions over Bloom levels x learning directions, deduplicated by embedding."""

    levels: list[Level] = Field(
        default_factory=lambda: list(LEVELS), min_length=1,
        description="Bloom-style difficulty levels cycled over topics",
    )
    directions: list[str] = Field(
        default_factory=lambda: ["character", "plot", "theme", "language", "connection"], min_length=1,
        description="learning directions (pipelines/ram2c/agents/scenario.yaml)",
    )
    excluded_themes: list[str] = Field(
        default_factory=lambda: ["religion"],
        description="topics mentioning these themes are dropped and the writer is told to avoid them (paper: "
        "religion)",
    )
    oversample: float = Field(1.5, ge=1.0, description="candidates written per dialogue (before dedup)")
    max_similarity: float = Field(0.9, gt=0.0, le=1.0, description="cosine above which a topic is a duplicate")

    @model_validator(mode="after")
    def _known(self) -> TopicConfig:
        scenario = load_scenario()
        unknown = [d for d in self.directions if d not in scenario["directions"]]
        if unknown:
            raise ValueError(f"unknown directions {unknown}; use some of {sorted(scenario['directions'])}")
        return self


class StudentConfig(StrictModel):
    seed: int = Field(0, description="persona draw (grade, two traits, interest, reading level), distinct per dialogue")


class GroupConfig(StrictModel):
    """One expert group: its name (T, P, E) and the retrieval group (``retrieval.groups`` key) it reads."""

    name: GroupName = Field(description="group: T (teachers) | P (psychologists) | E (ethics experts)")
    retrieval_group: str = Field(description="the retrieval.groups key whose kinds this group reads")


def _default_groups() -> list[GroupConfig]:
    return [
        GroupConfig(name="T", retrieval_group="teacher"),
        GroupConfig(name="P", retrieval_group="psychologist"),
        GroupConfig(name="E", retrieval_group="ethics"),
    ]


class ReflectionConfig(StrictModel):
    """Group reflection: ``candidates`` documents retrieved per group, each voted on by every expert;
    a document with at least ``accept_share`` yes votes is accepted. ``vote_call``: ``per_expert``
    (one ballot call per expert with a yes/no for every candidate) or ``per_document`` (one call per
    expert and candidate); either way every vote is recorded."""

    candidates: int = Field(
        3, ge=1,
        description="documents retrieved per group and turn (multi-query RRF), each voted on by every expert (5+ "
        "for real runs)",
    )
    accept_share: float = Field(
        0.5, gt=0.0, le=1.0,
        description="a document needs at least this share of yes votes to be accepted",
    )
    vote_call: Literal["per_expert", "per_document"] = Field(
        "per_expert",
        description="per_expert: one ballot call per expert with a yes/no for every candidate (k calls per group) | "
        "per_document: one call per (expert, candidate); every vote is recorded either way",
    )


class AblationConfig(StrictModel):
    """The paper's Table 3, one switch each: ``skip_groups`` [P] / [E] / [P, E]; ``one_expert``;
    ``selection``: vote (group reflection), similarity (voting off: top retrieved documents),
    rerank (cross-encoder scores instead of votes; needs retrieval.rerank.model)."""

    skip_groups: list[Literal["P", "E"]] = Field([], description="[P] no P group, [E] no E group, [P, E] neither")
    one_expert: bool = Field(False, description="true: one expert per group")
    selection: Literal["vote", "similarity", "rerank"] = Field(
        "vote",
        description="vote (group reflection) | similarity (voting off: top retrieved) | rerank (cross-encoder; "
        "needs retrieval.rerank.model)",
    )


class GateConfig(StrictModel):
    """Quality gates on each pair (see :mod:`pipelines.ram2c.gates`)."""

    max_chars: dict[Language, int] = Field(
        default_factory=lambda: {"en": 1200, "zh": 500},
        description="longer chosen or rejected replies are dropped",
    )
    min_language_share: float = Field(
        0.5, ge=0.0, le=1.0,
        description="share of letters in the dialogue's script below which a reply is in the wrong language",
    )


ROLES = ("topic_writer", "student", "drafter", "expert", "synthesizer", "query_rewriter")
"""The RAM2C LLM roles (``llm.roles`` may name only these); votes, analyses and revisions are ``expert``."""


class OutputsConfig(GenerationOutputs):
    """The one place the stage's output folders are named (dvc.yaml lists the files in them)."""

    generated_dir: str = Field(
        "data/generated/ram2c",
        description="dpo.jsonl, sft.jsonl, preference/, llamafactory/, dialogues/traces/dropped.jsonl",
    )
    reports_dir: str = Field("reports/generate_ram2c", description="metrics.json, usage.json")
    llamafactory_name: str = Field("ram2c_preference", description="dataset name in llamafactory/dataset_info.json")


class Ram2cConfig(GenerationConfig):
    ROLES: ClassVar[tuple[str, ...]] = ROLES
    sources: list[SourceConfig] = Field(
        default_factory=_default_sources, min_length=1,
        description="one book per language; the first source in `language` is read",
    )
    language: Language = Field("en", description="en | zh: prompts, student, replies and the language gate")
    dialogues: int = Field(6, ge=1, description="dialogues (one student persona each); the paper: 3,500")
    turns: int = Field(1, ge=1, description="turns per dialogue (T); later turns answer the previous chosen reply")
    topics: TopicConfig = Field(TopicConfig(), description="discussion topics written per dialogue")
    students: StudentConfig = Field(StudentConfig(), description="simulated student personas")
    groups: list[GroupConfig] = Field(
        default_factory=_default_groups, min_length=1,
        description="in order; each group names the retrieval group (retrieval.groups) it reads",
    )
    experts_per_group: int = Field(
        3, ge=1,
        description="k distinct expert personas per group, as in the issue and the paper's main runs (scenario.yaml "
        "has 7 per group, as in the paper's Fig. 4 with 3, 5 and 7 voters); 1 = the one_expert ablation",
    )
    expert_call: Literal["joint", "separate"] = Field(
        "joint",
        description="joint: one call per expert whose reply holds its analysis of its reference, then its revision "
        "(the analysis is the revision's chain of thought; 3 dependent calls per group) | separate: an analyst call, "
        "then a reviser call given that analysis (4 per group)",
    )
    analysis_chars: int = Field(
        600,
        ge=40,
        le=1500,
        description="longest analysis of an expert_call joint reply; json mode bounds it in the schema, so the "
        "revision keeps room within max_tokens.analyst_reviser",
    )
    reflection: ReflectionConfig = Field(
        ReflectionConfig(),
        description="group reflection: retrieved documents voted on by the experts",
    )
    ablation: AblationConfig = Field(AblationConfig(), description="the paper's Table 3, one switch each")
    max_tokens: dict[Role, int] = Field(
        {},
        description="reply caps per agent (small for the CPU default; 256-512 for real models)",
    )
    max_attempts: int = Field(2, ge=1, description="tries per agent when a reply does not parse")
    retry_temperature: float | None = Field(
        0.7, ge=0.0, le=2.0,
        description="temperature of re-asks after a greedy attempt (null: keep)",
    )
    gates: GateConfig = Field(GateConfig(), description="filters of the chosen and rejected replies")
    n_rewrites: int | None = Field(
        None,
        ge=0,
        le=8,
        description="rewrites of (topic, answer), one call per turn shared by the groups (None: retrieval.n_rewrites; "
        "set over retrieval.n_rewrites when the stage loads its params, so the shard fingerprint records it)",
    )
    outputs: OutputsConfig = Field(OutputsConfig(), description="output folders (dvc.yaml lists the files in them)")

    @model_validator(mode="after")
    def _groups_and_experts(self) -> Ram2cConfig:
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ValueError(f"groups must be distinct; got {names}")
        experts = load_scenario()["experts"]
        for name in names:
            if self.experts_per_group > len(experts[name]):
                raise ValueError(
                    f"experts_per_group {self.experts_per_group} > {len(experts[name])} personas of group {name} "
                    "(pipelines/ram2c/agents/scenario.yaml); lower it or add personas"
                )
        if not any(s.language == self.language for s in self.sources):
            raise ValueError(f"no source in language {self.language!r}; add one to ram2c.sources")
        return self

    def active_groups(self) -> list[GroupConfig]:
        """Groups in order T -> P -> E, without the ablated ones."""
        return [g for g in self.groups if g.name not in self.ablation.skip_groups]

    def experts(self) -> int:
        return 1 if self.ablation.one_expert else self.experts_per_group
