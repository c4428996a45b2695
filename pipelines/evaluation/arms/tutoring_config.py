"""The ``evaluate.tutoring`` params: the systems that answer the held-out prompts, the comparisons
of the RAM2C paper's Tables 1-3 between them, the judges, the human rating pack and the failure
budget (strict: an unknown key, system or kind is an error saying what to change).

    tutoring:
      systems:                                   # "tuned" (the DPO adapter as the drafter) is always there
        - {name: base, kind: base}               # the ram2c drafter's backend (the raw model)
        - {name: glm, kind: reference, backend: {kind: openai, model: glm-4, ...}}   # GLM
        - {name: glm_r, kind: team, draft: glm, backend: {...}}                      # GLM-R
        - {name: glm_p_r, kind: team, draft: glm, skip_groups: [P], backend: {...}}  # GLM-P/R
      comparisons:                               # (system, baseline) pairs per table of the paper
        table_1: [[tuned, base]]
        table_2: [[tuned, glm], [tuned, glm_r], [glm, glm_r]]
        table_3: [[glm, glm_r], [glm_p_r, glm_r]]

Only systems a comparison names (and the drafts their teams rewrite) run; each answers every
held-out prompt once, whatever the number of comparisons it is in.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from pipelines.config import StrictModel, distinct
from pipelines.evaluation.hts.config import HTSConfig, JudgeConfig
from pipelines.llm.config import BackendConfig, LLMConfig
from pipelines.ram2c.config import ROLES

SystemKind = Literal["base", "reference", "team"]
TUNED = "tuned"
TABLES = ("1", "2", "3")
REFERENCE_EXAMPLE = (
    "backend: {kind: openai, model: glm-4, base_urls: [https://open.bigmodel.cn/api/paas/v4], "
    "api_key_env: ZHIPUAI_API_KEY}"
)


class TutoringSystem(StrictModel):
    """One system answering the held-out prompts:

    - ``base``: the ram2c section's drafter backend (the raw model, as generation asks it);
    - ``reference``: ``backend`` as the drafter (another model, e.g. GLM-4: the paper's GLM), its key
      from the env variable ``api_key_env``;
    - ``team``: the RAM2C team (the ram2c section's T -> P -> E groups, retrieval and votes) rewrites
      the replies of the system ``draft``; ``skip_groups`` / ``one_expert`` make the paper's Table 3
      variants (GLM-P/R, GLM-E/R, GLM-PE/R, GLM-R/1). Every team role runs on ``backend``, or, when
      it is null, on the ram2c section's own roles (the team of ``generate_ram2c``).

    ``label`` names it in the tables (default: the model for ``base``, the name for ``reference``,
    the paper's form for ``team``: ``<draft>-R``, ``<draft>-P/R``, ``<draft>-PE/R``, ``<draft>-R/1``).
    """

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64,
        description="unique name a comparison refers to (letters, digits, _ . -)",
    )
    kind: SystemKind = Field(
        description="base: the ram2c drafter's backend | reference: backend as the drafter | team: the RAM2C team "
        "rewriting draft's replies",
    )
    label: str | None = Field(
        None, min_length=1, max_length=80,
        description="name in the tables (null: the model for base, the name for reference, <draft>-R style for team)",
    )
    backend: BackendConfig | None = Field(
        None,
        description="reference: the drafter's backend; team: every team role's backend (null: the ram2c section's "
        "own roles)",
    )
    draft: str | None = Field(None, description="team only: the system whose replies the team rewrites")
    skip_groups: list[Literal["P", "E"]] = Field(
        [],
        description="team only: expert groups left out (the paper's Table 3: P, E or both)",
    )
    one_expert: bool = Field(False, description="team only: one expert per group (Table 3's R/1)")

    @model_validator(mode="after")
    def _fits_the_kind(self) -> TutoringSystem:
        if self.name == TUNED:
            raise ValueError("system name 'tuned' is the model under test (always there); choose another name")
        if self.kind == "base" and self.backend is not None:
            raise ValueError(
                f"system {self.name!r} of kind base runs on the ram2c drafter's backend; remove its backend, "
                "or use kind reference for another model"
            )
        if self.kind == "reference" and self.backend is None:
            raise ValueError(f"system {self.name!r} of kind reference needs a backend, e.g. {REFERENCE_EXAMPLE}")
        if self.kind == "team" and not self.draft:
            raise ValueError(f"system {self.name!r} of kind team needs draft: the system whose replies it rewrites")
        if self.kind != "team" and (self.draft or self.skip_groups or self.one_expert):
            raise ValueError(f"system {self.name!r}: draft, skip_groups and one_expert are for kind team only")
        distinct(f"system {self.name!r} skip_groups", self.skip_groups)
        return self

    def team_suffix(self) -> str:
        """The paper's mark of a team variant: ``R``, ``P/R``, ``E/R``, ``PE/R``, ``R/1`` (``P/R/1``...)."""
        skipped = "".join(g for g in ("P", "E") if g in self.skip_groups)
        return (f"{skipped}/R" if skipped else "R") + ("/1" if self.one_expert else "")


class ComparisonTables(StrictModel):
    """(system, baseline) pairs per table; a pair's HTS score is the system's (50 = parity)."""

    table_1: list[tuple[str, str]] = Field(
        default_factory=lambda: [(TUNED, "base")],
        description="Table 1: the fine-tuned model vs its raw model",
    )
    table_2: list[tuple[str, str]] = Field([], description="Table 2: e.g. [[tuned, glm], [tuned, glm_r], [glm, glm_r]]")
    table_3: list[tuple[str, str]] = Field(
        [],
        description="Table 3 (the ablation set's ram2c-* entries): e.g. [[base, base_r], [base_p_r, base_r], "
        "[base_e_r, base_r], [base_pe_r, base_r], [base_r1, base_r]]",
    )

    def by_table(self) -> dict[str, list[tuple[str, str]]]:
        """``{"1": pairs, ...}`` of the tables that have pairs."""
        tables = {"1": self.table_1, "2": self.table_2, "3": self.table_3}
        return {k: [tuple(p) for p in v] for k, v in tables.items() if v}

    def pairs(self) -> list[tuple[str, str]]:
        """Every distinct pair, in table order (a pair in two tables is judged once)."""
        return list(dict.fromkeys(p for pairs in self.by_table().values() for p in pairs))


def comparison_key(system: str, baseline: str) -> str:
    """The folder (and salt of the positions) of one comparison."""
    return f"{system}_vs_{baseline}"


class HumanPackConfig(StrictModel):
    """The human rating pack the stage writes into ``folder``: per rater a blind CSV sheet, one HTML
    form for all raters, and the key (``key.csv``: keep it from the raters). Each rater gets, per
    comparison and dimension, ``sample`` items (the paper: 25; null: all) in their own balanced order."""

    raters: list[str] = Field(
        min_length=1,
        description="one blind sheet each (rename to your raters); Fleiss' kappa across them",
    )
    sample: int | None = Field(
        25, ge=1,
        description="items per rater, comparison and dimension (the paper: 25); null = all",
    )
    seed: int = Field(0, description="seed of each rater's item sample and order")
    language: Literal["en", "zh"] | None = Field(None, description="the form's language; null: ram2c.language")
    folder: str = Field("reports/evaluate/human", description="where the pack is written (a DVC out of evaluate)")

    @field_validator("raters")
    @classmethod
    def _distinct_raters(cls, raters: list[str]) -> list[str]:
        return distinct("human.raters", raters, why="each is a rater of the kappa")


def _default_judges() -> list[JudgeConfig]:
    return [
        JudgeConfig(name="base-seed1", seed=1, temperature=0.7, max_tokens=16),
        JudgeConfig(name="base-seed2", seed=2, temperature=0.7, max_tokens=16),
    ]


class TutoringEvalConfig(StrictModel):
    """The DPO adapter as the responder (``roles``: ``[drafter]``) on held-out (topic, student
    answer) prompts: the DPO eval split plus ``extra_rows`` rows whose prompt is not in the train
    split, topped up (``new_prompts``) with new prompts the ram2c topic writer and student write (the
    paper's evaluation set: questions not in the fine-tuning set), ``items`` of them (seeded by
    ``hts.seed``; null: the recorded ones). ``systems`` and ``comparisons``: see the module docstring.
    ``judge_llm`` (null: the ram2c drafter's backend, i.e. the base model) runs the judges of ``hts``.
    ``max_failed_share``: more failed replies of a system, or unscored judgments of a comparison,
    than this share stop the stage (exit 1) naming the failures file."""

    roles: list[str] = Field(
        default_factory=lambda: ["drafter"], min_length=1, max_length=1,
        description="the one RAM2C role answering the held-out prompts",
    )
    tuned_backend: BackendConfig | None = Field(None, description="a served fine-tune instead of base + adapter")
    items: int | None = Field(
        8, ge=1,
        description="held-out prompts (recorded ones seeded by hts.seed, then new ones); null = the recorded ones",
    )
    dataset: str = Field(
        "data/train/dpo",
        description="DPO dataset whose eval split is held out; prompts of its train split never are",
    )
    extra_rows: str | None = Field(
        "data/generated/ram2c/dpo.jsonl",
        description="also held out: generated pairs whose prompt is not in the train split (null: eval split only)",
    )
    new_prompts: bool = Field(
        True,
        description="top up to items with new prompts: the ram2c topic writer (topic plans after generation's) and "
        "student (personas after generation's), as the paper's evaluation set",
    )
    systems: list[TutoringSystem] = Field(
        default_factory=lambda: [TutoringSystem(name="base", kind="base")],
        description="what answers the prompts besides \"tuned\" (the DPO adapter as the drafter); only systems a "
        "comparison names run, each once",
    )
    comparisons: ComparisonTables = Field(
        ComparisonTables(),
        description="(system, baseline) pairs per table of the paper; a row's score is the system's (50 = parity)",
    )
    judge_llm: LLMConfig | None = Field(
        None,
        description="the judges' llm block (e.g. a stronger API model; default and cache from the top-level llm "
        "unless set); null = the ram2c drafter's backend, i.e. the base model",
    )
    hts: HTSConfig = Field(
        default_factory=lambda: HTSConfig(mode="json", reasoning=False, concurrency=24, judges=_default_judges()),
        description="HTS judging: judges, dimensions, positions, bootstrap intervals",
    )
    human: HumanPackConfig | None = Field(
        None,
        description="the human rating pack (sheets, form.html, key.csv), linked from the report; null: none. "
        "Import: python -m pipelines.evaluation.human.pack",
    )
    max_failed_share: float = Field(
        0.2, ge=0.0, le=1.0,
        description="more failed replies of a system (or unscored judgments of a comparison) than this share -> "
        "failures.json written, exit 1",
    )

    @field_validator("roles")
    @classmethod
    def _ram2c_roles(cls, roles: list[str]) -> list[str]:
        unknown = [r for r in roles if r not in ROLES]
        if unknown:
            raise ValueError(f"unknown role(s) {unknown}; this system's roles: {', '.join(ROLES)}")
        return roles

    @field_validator("systems")
    @classmethod
    def _distinct_systems(cls, systems: list[TutoringSystem]) -> list[TutoringSystem]:
        distinct("system names", [s.name for s in systems], why="each names a folder and table rows")
        return systems

    @model_validator(mode="after")
    def _comparisons_name_known_systems(self) -> TutoringEvalConfig:
        known = {TUNED, *(s.name for s in self.systems)}
        by_name = {s.name: s for s in self.systems}
        for s in self.systems:
            if s.kind == "team" and (s.draft not in known or (s.draft in by_name and by_name[s.draft].kind == "team")):
                raise ValueError(
                    f"system {s.name!r}: draft {s.draft!r} must be tuned or a base or reference system of "
                    f"evaluate.tutoring.systems (have: {', '.join(sorted(known))})"
                )
        tables = self.comparisons.by_table()
        if not tables:
            raise ValueError("comparisons: every table is empty; e.g. table_1: [[tuned, base]]")
        for table, pairs in tables.items():
            for system, baseline in pairs:
                unknown = [n for n in (system, baseline) if n not in known]
                if unknown:
                    raise ValueError(
                        f"comparisons.table_{table}: {unknown} not in evaluate.tutoring.systems "
                        f"(have: {', '.join(sorted(known))}); add them or fix the names"
                    )
                if system == baseline:
                    raise ValueError(f"comparisons.table_{table}: [{system}, {baseline}] compares a system with itself")
            distinct(f"comparisons.table_{table} pairs", [f"{a} vs {b}" for a, b in pairs])
        folders: dict[str, tuple[str, str]] = {}
        for pair in self.comparisons.pairs():  # names may hold "_vs_": two pairs must not share a folder
            other = folders.setdefault(comparison_key(*pair), pair)
            if other != pair:
                raise ValueError(
                    f"comparisons {list(other)} and {list(pair)} would share the folder {comparison_key(*pair)!r} "
                    "(and their judges' position order); rename a system so that no name has '_vs_' in it"
                )
        clash = sorted(known & set(self.hts.roles()))
        if clash:
            raise ValueError(f"system name(s) {clash} are also judge roles (hts.judges[].role); rename the system")
        return self

    def compared(self) -> list[str]:
        """The systems that run: those the comparisons name and the drafts of their teams, each
        draft before its teams (``tuned`` first, then in ``systems`` order)."""
        named = {n for pair in self.comparisons.pairs() for n in pair}
        by_name = {s.name: s for s in self.systems}
        named |= {by_name[n].draft for n in list(named) if n in by_name and by_name[n].kind == "team"}
        order = [TUNED, *(s.name for s in self.systems if s.kind != "team"), *(s.name for s in self.systems)]
        return [n for n in dict.fromkeys(order) if n in named]

    def system(self, name: str) -> TutoringSystem | None:
        """The declared system ``name`` (None for ``tuned``)."""
        return next((s for s in self.systems if s.name == name), None)

    def needs_team(self) -> bool:
        """Whether a system that runs is a RAM2C team (its retrieval reads ``build_kb`` and ``retrieval``)."""
        return any((s := self.system(n)) is not None and s.kind == "team" for n in self.compared())
