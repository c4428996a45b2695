"""The shared part of every generate stage's config and run: the repeated keys with the team's roles
checked, and the runtime a run makes (closed) or is given (left open)."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest
from pydantic import ValidationError

from pipelines.agents.generation import GenerationConfig, run_runtime
from pipelines.agents.outputs import GenerationOutputs
from pipelines.llm.client import LLMRuntime
from pipelines.llm.config import LLMConfig

LLM = {"default": {"kind": "scripted", "replies": "r.jsonl"}}


class Outputs(GenerationOutputs):
    generated_dir: str = "data/generated/x"
    reports_dir: str = "reports/generate_x"


class TeamConfig(GenerationConfig):
    ROLES: ClassVar[tuple[str, ...]] = ("writer", "judge")
    outputs: Outputs = Outputs()
    rounds: int = 1


def test_a_team_config_has_the_shared_keys_and_its_own():
    cfg = TeamConfig(llm=LLM)
    assert (cfg.output_mode, cfg.concurrency, cfg.max_failed_share, cfg.progress) == ("json", 16, 0.2, True)
    assert (cfg.shard.index, cfg.shard.count, cfg.outputs.generated_dir, cfg.rounds) == (0, 1, "data/generated/x", 1)
    assert list(TeamConfig.model_fields)[-2:] == ["progress", "rounds"]  # the team's keys after the shared ones


def test_the_team_roles_are_the_ones_checked():
    TeamConfig(llm=LLM | {"roles": {"judge": {"sampling": {"temperature": 0.7}}}})
    with pytest.raises(ValidationError, match="unknown role 'planner' in llm.roles; valid roles: writer, judge"):
        TeamConfig(llm=LLM | {"roles": {"planner": {"sampling": {"temperature": 0.7}}}})
    with pytest.raises(ValidationError, match="concurency"):
        TeamConfig(llm=LLM, concurency=4)  # still strict


def test_a_run_closes_the_runtime_it_makes_and_leaves_a_given_one_open(monkeypatch):
    closed: list[LLMRuntime] = []

    async def close(self):
        closed.append(self)

    monkeypatch.setattr(LLMRuntime, "close", close)
    config = LLMConfig.model_validate(LLM | {"cache": None})
    given = LLMRuntime(config)

    async def main():
        async with run_runtime(config) as made:
            assert made is not given
        async with run_runtime(config, given) as same:
            assert same is given
        with pytest.raises(RuntimeError):
            async with run_runtime(config) as failing:
                raise RuntimeError("the run failed")
        return made, failing

    made, failing = asyncio.run(main())
    assert closed == [made, failing]
