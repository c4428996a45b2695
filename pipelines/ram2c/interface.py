"""The RAM2C tutoring team as a :class:`~pipelines.agents.team_interface.Team`: stage
``generate_ram2c`` on the ``ram2c`` section (:class:`pipelines.ram2c.config.Ram2cConfig`) and the
``build_kb`` and ``retrieval`` sections (the knowledge bases the groups read), run by
:mod:`pipelines.ram2c.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents.harness import GenerationOutputs, HarnessReport
from pipelines.agents.shortfalls import Shortfall, count_shortfall
from pipelines.agents.team_interface import Configs, Team
from pipelines.llm.client import LLMRuntime
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.run import finish_ram2c, generate_ram2c_async, team_retrieval_config
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig


class RAM2C(Team):
    name, stage = "ram2c", "generate_ram2c"
    sections = {"ram2c": Ram2cConfig, "build_kb": BuildKBConfig, "retrieval": RetrievalConfig}

    def configure(self, cfgs: Configs) -> Configs:
        """``ram2c.n_rewrites`` (when set) over ``retrieval.n_rewrites``: the retrieval the team runs,
        and so the one its fingerprint records."""
        return {**cfgs, "retrieval": team_retrieval_config(cfgs["ram2c"], cfgs["retrieval"])}

    async def generate_async(
        self, cfgs: Configs, *, root: Path | str = ".", runtime: LLMRuntime | None = None, **options: Any
    ) -> dict[str, Any]:
        """``options``: ``retriever`` and ``reranker`` to use instead of opening the configured ones."""
        return await generate_ram2c_async(
            cfgs["ram2c"], cfgs["build_kb"], cfgs["retrieval"], root=root, runtime=runtime, **options
        )

    def finish(
        self, cfgs: Configs, outputs: GenerationOutputs, report: HarnessReport, *, context: dict, counters: dict
    ) -> dict[str, Any]:
        return finish_ram2c(cfgs["ram2c"], outputs, report, context=context, counters=counters)

    def summary(self, metrics: dict[str, Any]) -> str:
        reasons = ", ".join(f"{k} {v}" for k, v in metrics["dropped_by_reason"].items()) or "none"
        return (
            f"{metrics['dialogues']} dialogues, {metrics['pairs_kept']} pairs kept, {metrics['pairs_dropped']} dropped "
            f"({reasons}); {metrics['llm_calls_per_dialogue']} LLM calls per dialogue; {metrics['wall_s']} s"
        )

    def shortfalls(self, cfgs: Configs, metrics: dict[str, Any]) -> list[Shortfall | None]:
        """Dialogues requested vs finished (and why: topics not written or dropped), pairs kept vs turns run."""
        unwritten = metrics["topics_planned"] - metrics["topics_written"]
        causes = [f"{unwritten} of {metrics['topics_planned']} topic questions not written (replies did not parse)"]
        causes = causes[:1] if unwritten else []
        causes += [f"{n} topics dropped ({reason})" for reason, n in metrics["topics_dropped"].items()]
        if metrics["dialogues_failed"]:
            causes.append(f"{metrics['dialogues_failed']} dialogues failed")
        finished = metrics["dialogues"] - metrics["dialogues_failed"]
        dropped = ", ".join(f"{reason} {n}" for reason, n in metrics["dropped_by_reason"].items())
        return [
            count_shortfall("dialogues", cfgs["ram2c"].dialogues, finished, cause="; ".join(causes)),
            count_shortfall("preference pairs (one per turn)", metrics["turns"], metrics["pairs_kept"],
                            cause=f"dropped by the quality gates: {dropped}" if dropped else ""),
        ]  # fmt: skip


TEAM = RAM2C()
