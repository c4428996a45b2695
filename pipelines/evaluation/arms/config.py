"""The ``evaluate`` section of params.yaml (stage ``evaluate``): which systems measure the tuned
models, on how many held-out items, in which roles, and how the comparison is bootstrapped.

The base model and everything else of a system (data, prompts, sampling, output mode) come from
that system's own generate section (``tagging``, ``kgc``, ``ram2c``), so the base run asks the
same requests as generation and the shared request cache answers them. The tuned run is the
same with the roles below on ``base + adapter`` (or on ``tuned_backend``: a served fine-tune).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from pipelines.config import StrictModel, distinct
from pipelines.evaluation.hts.config import HTSConfig, JudgeConfig
from pipelines.llm.config import BackendConfig, LLMConfig

SystemName = Literal["tagging", "kgc", "tutoring"]
SYSTEMS: tuple[str, ...] = ("tagging", "kgc", "tutoring")


def known_roles(roles: list[str], valid: tuple[str, ...]) -> list[str]:
    """``roles`` when each is one of the system's LLM roles ``valid``; ValueError naming them otherwise."""
    unknown = [r for r in roles if r not in valid]
    if unknown:
        raise ValueError(f"unknown role(s) {unknown}; this system's roles: {', '.join(valid)}")
    return roles


class BootstrapConfig(StrictModel):
    """Seeded paired percentile bootstrap of every tuned-vs-base delta."""

    resamples: int = Field(1000, ge=1)
    seed: int = 0
    confidence: float = Field(0.95, gt=0.0, lt=1.0)


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
        from pipelines.tagging.config import ROLES

        return known_roles(roles, ROLES)


class KGCEvalConfig(TunedRoles):
    """CooperKGC (0-shot) on ``items`` sentences per dataset drawn with ``seed`` from the sentences
    that gave no SFT row (null: each ``kgc.datasets`` entry's own ``sample`` / ``seed``)."""

    roles: list[str] = Field(default_factory=lambda: ["ner_expert", "re_expert", "ee_expert"], min_length=1)
    items: int | None = Field(None, ge=1)
    seed: int | None = None

    @field_validator("roles")
    @classmethod
    def _kgc_roles(cls, roles: list[str]) -> list[str]:
        from pipelines.kgc.config import ROLES

        return known_roles(roles, ROLES)


def _default_judges() -> list[JudgeConfig]:
    return [
        JudgeConfig(name="base-seed1", seed=1, temperature=0.7, max_tokens=128),
        JudgeConfig(name="base-seed2", seed=2, temperature=0.7, max_tokens=128),
    ]


BaselineKind = Literal["base", "reference", "reference_team"]
REFERENCE_EXAMPLE = (
    "backend: {kind: openai, model: glm-4, base_urls: [https://open.bigmodel.cn/api/paas/v4], "
    "api_key_env: ZHIPUAI_API_KEY}"
)


class TutoringBaseline(StrictModel):
    """One baseline of the tutoring comparison, one row ``<tuned> vs <name>`` of HTS Table 1:

    - ``base``: the ram2c section's drafter backend (the base model, as generation asks it);
    - ``reference``: ``backend`` (another model, e.g. GLM-4 on an OpenAI-compatible endpoint, its key
      from the env variable ``api_key_env``) as the drafter: the paper's GLM;
    - ``reference_team``: ``backend`` drafts and the full RAM2C team (the ram2c section's T / P / E
      groups, retrieval and votes, every team role on ``backend``) rewrites the draft: the paper's GLM-R.

    The name ``base`` belongs to kind ``base`` (its files and metric names are those of a run without
    baselines); ``tuned`` is the model under test.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    kind: BaselineKind
    backend: BackendConfig | None = None

    @model_validator(mode="after")
    def _backend_fits_the_kind(self) -> TutoringBaseline:
        if self.name == "tuned":
            raise ValueError("baseline name 'tuned' is the model under test; choose another name")
        if self.kind == "base" and self.backend is not None:
            raise ValueError(
                f"baseline {self.name!r} of kind base runs on the ram2c drafter's backend; remove its backend, "
                "or use kind reference for another model"
            )
        if self.kind != "base" and self.backend is None:
            raise ValueError(f"baseline {self.name!r} of kind {self.kind} needs a backend, e.g. {REFERENCE_EXAMPLE}")
        if self.name == "base" and self.kind != "base":
            raise ValueError(f"the name 'base' is kept for kind base; rename the {self.kind} baseline (e.g. glm)")
        return self


class TutoringEvalConfig(TunedRoles):
    """The DPO adapter as the responder (``roles``: ``[drafter]``) on held-out (topic, student
    answer) prompts: the DPO eval split plus ``extra_rows`` rows whose prompt is not in the train
    split; ``items`` of them (seeded by ``hts.seed``; null: all). ``judge_llm`` (null: the ram2c
    section's drafter backend, i.e. the base model) runs the judges of ``hts``. ``baselines``: what
    the responder is compared against, one HTS row each (:class:`TutoringBaseline`; default: the
    base model only)."""

    roles: list[str] = Field(default_factory=lambda: ["drafter"], min_length=1, max_length=1)
    baselines: list[TutoringBaseline] = Field(
        default_factory=lambda: [TutoringBaseline(name="base", kind="base")], min_length=1
    )
    items: int | None = Field(8, ge=1)
    dataset: str = "data/train/dpo"
    extra_rows: str | None = "data/generated/ram2c/dpo.jsonl"
    judge_llm: LLMConfig | None = None
    hts: HTSConfig = Field(default_factory=lambda: HTSConfig(mode="json", judges=_default_judges()))

    @field_validator("roles")
    @classmethod
    def _ram2c_roles(cls, roles: list[str]) -> list[str]:
        from pipelines.ram2c.config import ROLES

        return known_roles(roles, ROLES)

    @field_validator("baselines")
    @classmethod
    def _distinct_baselines(cls, baselines: list[TutoringBaseline]) -> list[TutoringBaseline]:
        distinct("baseline names", [b.name for b in baselines], why="each names an HTS row and a folder")
        return baselines

    @model_validator(mode="after")
    def _baselines_apart_from_judges(self) -> TutoringEvalConfig:
        clash = sorted({b.name for b in self.baselines} & set(self.hts.roles()))
        if clash:
            raise ValueError(f"baseline name(s) {clash} are also judge roles (hts.judges[].role); rename the baseline")
        return self

    def needs_team(self) -> bool:
        """Whether a baseline runs the RAM2C team (its retrieval reads ``build_kb`` and ``retrieval``)."""
        return any(b.kind == "reference_team" for b in self.baselines)


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
