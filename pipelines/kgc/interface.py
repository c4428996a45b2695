"""CooperKGC as a :class:`~pipelines.agents.team_interface.Team`: stage ``generate_kgc`` on the
``kgc`` section (:class:`pipelines.kgc.config.KGCConfig`), run by :mod:`pipelines.kgc.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents.harness import GenerationOutputs, HarnessReport
from pipelines.agents.shortfalls import Shortfall, count_shortfall, unparseable_shortfalls
from pipelines.agents.team_interface import Configs, Team
from pipelines.errors import StageError
from pipelines.kgc.config import KGCConfig
from pipelines.kgc.datasets import ReaderError
from pipelines.kgc.run import finish_kgc, generate_kgc_async
from pipelines.llm.client import LLMRuntime


class KGC(Team):
    name, stage = "kgc", "generate_kgc"
    sections = {"kgc": KGCConfig}

    async def generate_async(
        self, cfgs: Configs, *, root: Path | str = ".", runtime: LLMRuntime | None = None, **options: Any
    ) -> dict[str, Any]:
        """``options``: ``exclude_ids``, sentence ids never evaluated (the evaluate stage's held-out run)."""
        return await generate_kgc_async(cfgs["kgc"], root, runtime, **options)

    def generate(
        self, cfgs: Configs, *, root: Path | str = ".", runtime: LLMRuntime | None = None, **options: Any
    ) -> dict[str, Any]:
        try:
            return super().generate(cfgs, root=root, runtime=runtime, **options)
        except ReaderError as exc:  # a file that cannot be read or scored (GoldError): the file in the message
            raise StageError(str(exc)) from exc

    def finish(
        self, cfgs: Configs, outputs: GenerationOutputs, report: HarnessReport, *, context: dict, counters: dict
    ) -> dict[str, Any]:
        return finish_kgc(cfgs["kgc"], outputs, report, context=context, counters=counters)

    def summary(self, metrics: dict[str, Any]) -> str:
        parts = []
        for name, system in metrics["systems"].items():
            f1 = ", ".join(f"{d} {100 * s['overall']['f1']:.1f}" for d, s in system["datasets"].items())
            parts.append(f"{name}: {f1}")
        return (
            f"{metrics['n_evaluated']} sentences ({metrics['output_mode']} mode); F1 % "
            + "; ".join(parts)
            + f"; {metrics['sft_rows']} SFT rows"
        )

    def shortfalls(self, cfgs: Configs, metrics: dict[str, Any]) -> list[Shortfall | None]:
        """Sentences evaluated per dataset vs its ``sample``, datasets left out, sentences without an
        SFT row and SFT rows whose answer scored F1 0, failed sentences and unparseable replies per
        system and role."""
        found: list = []
        for dataset in cfgs["kgc"].datasets:
            info = metrics["datasets"].get(dataset.name)
            if info is not None and dataset.evaluate and dataset.sample is not None:
                found.append(count_shortfall(f"{dataset.name} sentences evaluated", dataset.sample, info["evaluated"],
                                             cause=f"the dataset holds {info.get('pool', '?')}"))  # fmt: skip
        found += [Shortfall(f"dataset {name} left out", cause="its files are missing") for name in metrics["left_out"]]
        sft = cfgs["kgc"].sft
        why = f"no qualifying final answer (kgc.sft.keep {sft.keep}, min_f1 {sft.min_f1})"
        found.append(count_shortfall("sentences giving an SFT row", metrics["n_evaluated"], metrics.get("sft_rows"),
                                     cause=why))  # fmt: skip
        rows, zero = metrics.get("sft_rows") or 0, metrics.get("sft_f1_zero") or 0
        found.append(count_shortfall("SFT rows whose answer scores F1 > 0", rows, rows - zero,
                                     cause=f"{zero} scored sentence F1 0 (kgc.sft.min_f1 {sft.min_f1})"))  # fmt: skip
        for name, system in metrics["systems"].items():
            found.append(count_shortfall(f"{name}: sentences without a failure", metrics["n_evaluated"],
                                         metrics["n_evaluated"] - system.get("failed_samples", 0)))  # fmt: skip
            found += unparseable_shortfalls(
                {f"{name}: {role}": c for role, c in (system.get("unparseable") or {}).items()}
            )
        return found


TEAM = KGC()
