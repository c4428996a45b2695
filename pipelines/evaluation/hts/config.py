"""The typed ``hts`` settings of the evaluation (strict: unknown keys and bad values are errors)
and the judges they name::

    hts:
      seed: 0                  # balanced positions of the replies (per comparison, judge, dimension)
      resamples: 1000          # bootstrap resamples of the score intervals
      dimensions: [humanized, teaching, safety]
      mode: text               # or json (schema-constrained replies)
      reasoning: true          # false: the verdict alone (no explanation before it; fewer tokens)
      max_attempts: 2
      validity:                # a judge is withheld from scores, kappa and deltas when, over >= min_verdicts
        max_constant_share: 0.9    #   verdicts, more than this share are one answer (A every time),
        alpha: 0.01                #   or its first- vs second-position picks fail a binomial test at alpha
        min_verdicts: 6
      judges:                  # several judges: different models (roles), or one model with seeds
        - {name: judge-seed1, role: hts_judge, seed: 1, temperature: 0.7}
        - {name: judge-seed2, role: hts_judge, seed: 2, temperature: 0.7}

Each judge's ``role`` selects its LLM in ``llm.roles`` (its own backend and model, or the
default one); ``seed`` / ``temperature`` / ``max_tokens`` override that role's sampling. Kappa is
computed between judges on distinct models only; seeds of one model give a self-consistency figure.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pipelines.config import StrictModel
from pipelines.evaluation.hts.agents.pairwise_judge import make_pairwise_judge
from pipelines.evaluation.hts.judging import DIMENSIONS, Judge, judge_items
from pipelines.evaluation.hts.scoring import validated_scores
from pipelines.stats.validity import ValidityRule


class JudgeConfig(StrictModel):
    """One judge: a name (a rater column in the kappa), its LLM role and sampling overrides."""

    name: str = Field(min_length=1, description="the judge's name (a rater column in the kappa); distinct per judge")
    role: str = Field(
        "hts_judge",
        description="LLM role the judge calls (its backend: llm.roles.<role>, else the judge llm's default)",
    )
    seed: int | None = Field(None, description="sampling seed (null: the role's)")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="sampling temperature (null: the role's)")
    max_tokens: int | None = Field(None, ge=1, description="reply cap (null: the role's)")


class HTSConfig(StrictModel):
    """How the tutoring replies are judged (see the module docstring)."""

    seed: int = Field(
        0,
        description="seed of the balanced reply positions (per comparison, judge and dimension) and of the item "
        "sample",
    )
    resamples: int = Field(1000, ge=1, description="bootstrap resamples of each HTS score's interval")
    confidence: float = Field(0.95, gt=0.0, lt=1.0, description="coverage of each HTS score's bootstrap interval")
    dimensions: list[Literal["humanized", "teaching", "safety"]] = Field(
        list(DIMENSIONS),
        description="judged dimensions (RAM2C Table 5 criteria)",
    )
    mode: Literal["text", "json"] = Field(
        "text",
        description="json: verdicts constrained to {reasoning, verdict} | text: \"Verdict: A/B/equal\" lines",
    )
    reasoning: bool = Field(
        True,
        description="false: the verdict alone ({\"verdict\": ...}); SmolLM2's reasoning was one letter, and each "
        "token a decode step of 48 calls (true + max_tokens 96 for real models)",
    )
    max_attempts: int = Field(2, ge=1, description="tries per judgment when a verdict does not parse")
    concurrency: int = Field(
        8, ge=1,
        description="judge calls in flight (the local model batches them: ram2c's max_batch_size)",
    )
    validity: ValidityRule = Field(
        default_factory=ValidityRule,
        description="when a judge is withheld as invalid (constant verdicts or position bias)",
    )
    judges: list[JudgeConfig] = Field(
        default_factory=lambda: [JudgeConfig(name="judge")], min_length=1,
        description="the judges: different models (roles), or one model with seeds; Fleiss' kappa across several",
    )

    @field_validator("dimensions")
    @classmethod
    def _distinct_dimensions(cls, value: list[str]) -> list[str]:
        if not value or len(set(value)) != len(value):
            raise ValueError("dimensions must be a non-empty list without repeats")
        return value

    @model_validator(mode="after")
    def _distinct_judges(self) -> HTSConfig:
        names = [j.name for j in self.judges]
        if len(set(names)) != len(names):
            raise ValueError(f"judge names must be distinct (they are the raters of the kappa), got {names}")
        return self

    def roles(self) -> list[str]:
        """The LLM roles the judges use (for ``LLMConfig.check_roles``)."""
        return list(dict.fromkeys(j.role for j in self.judges))


def build_judges(runtime: Any, cfg: HTSConfig) -> list[Judge]:
    """One :class:`Judge` per configured judge: ``runtime.for_role(role)`` with the overrides."""
    judges = []
    for spec in cfg.judges:
        llm = runtime.for_role(spec.role)
        changes = {k: getattr(spec, k) for k in ("seed", "temperature", "max_tokens") if getattr(spec, k) is not None}
        if changes:
            llm = runtime.for_role(spec.role, dataclasses.replace(llm.default_params, **changes))
        judges.append(Judge(spec.name, llm))
    return judges


async def run_judging(items: Any, runtime: Any, cfg: HTSConfig, *, progress: bool = False) -> dict[str, Any]:
    """Judge ``items`` (:class:`HTSItem`) with the configured judges and score them.

    Returns ``{"judgments": [Judgment], "report": RunReport (its trace rows go to the traces
    JSONL)`` and :func:`validated_scores`' ``"scores"`` (valid judges only), ``"position_preference"``,
    ``"validity"`` and ``"withheld"``; kappa is between judges with distinct roles (their models).
    """
    judgments, report = await judge_items(
        items,
        build_judges(runtime, cfg),
        seed=cfg.seed,
        dimensions=cfg.dimensions,
        concurrency=cfg.concurrency,
        agent=make_pairwise_judge(max_attempts=cfg.max_attempts, reasoning=cfg.reasoning),
        mode=cfg.mode,
        reasoning=cfg.reasoning,
        progress=progress,
    )
    models = {j.name: j.role for j in cfg.judges}
    scored = validated_scores(
        judgments, rule=cfg.validity, models=models, resamples=cfg.resamples, seed=cfg.seed, confidence=cfg.confidence
    )
    return {"judgments": judgments, "report": report, **scored}
