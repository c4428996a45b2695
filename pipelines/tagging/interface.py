"""The knowledge-tagging team as a :class:`~pipelines.agents.team_interface.Team`: stage
``generate_tagging`` on the ``tagging`` section (:class:`pipelines.tagging.config.TaggingConfig`),
run by :mod:`pipelines.tagging.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents.harness import GenerationOutputs, HarnessReport
from pipelines.agents.shortfalls import Shortfall, count_shortfall, unparseable_shortfalls
from pipelines.agents.team_interface import Configs, Team
from pipelines.llm.client import LLMRuntime
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.results import finish_tagging
from pipelines.tagging.run import generate_tagging_async


class Tagging(Team):
    name, stage = "tagging", "generate_tagging"
    sections = {"tagging": TaggingConfig}

    async def generate_async(
        self, cfgs: Configs, *, root: Path | str = ".", runtime: LLMRuntime | None = None, **options: Any
    ) -> dict[str, Any]:
        """With ``tagging.sizes``, a runtime passed in must come from
        :func:`pipelines.tagging.backbones.runtime_config`."""
        return await generate_tagging_async(cfgs["tagging"], root, runtime, **options)

    def finish(
        self, cfgs: Configs, outputs: GenerationOutputs, report: HarnessReport, *, context: dict, counters: dict
    ) -> dict[str, Any]:
        return finish_tagging(cfgs["tagging"], outputs, report, context=context, counters=counters)

    def summary(self, metrics: dict[str, Any]) -> str:
        parts = [
            f"{name}: acc {m['overall']['accuracy']:.3f} F1 {m['overall']['f1']:.3f} "
            f"coverage {m['overall'].get('coverage', 1.0):.2f}"
            for name, m in metrics["systems"].items()
        ]
        return (
            f"{metrics['n_evaluated']} pairs evaluated ({metrics['output_mode']} mode, "
            f"failures count as {metrics.get('failure_outcome', 'wrong')}); "
            + "; ".join(parts)
            + f"; {metrics['sft_rows']} SFT rows from {metrics.get('n_generation_run', 0)} generation pairs"
        )

    def shortfalls(self, cfgs: Configs, metrics: dict[str, Any]) -> list[Shortfall | None]:
        """Per system: pairs answered vs evaluated, and unparseable replies per role."""
        found: list = []
        for name, system in metrics["systems"].items():
            overall = system["overall"]
            if "answered" in overall:
                cause = f"{overall.get('failed', 0)} failed, counted as {metrics.get('failure_outcome', 'wrong')}"
                found.append(count_shortfall(f"{name}: evaluated pairs answered", overall["n"], overall["answered"],
                                             cause=cause))  # fmt: skip
            found += unparseable_shortfalls(
                {f"{name}: {role}": c for role, c in (system.get("unparseable") or {}).items()}
            )
        return found


TEAM = Tagging()
