"""Stage ``evaluate`` as one function: the tuned models back inside the three systems, each against
the base model on held-out data, with the generation stage's metrics and paired bootstrap deltas.

    metrics = evaluate(cfg, {"tagging": TaggingConfig, "kgc": KGCConfig, "ram2c": Ram2cConfig})

- tagging: the SFT adapter as the team's agents (:mod:`pipelines.evaluation.arms.tagging`);
- kgc: the SFT adapter as the CooperKGC experts (:mod:`pipelines.evaluation.arms.kgc`);
- tutoring: the DPO adapter as the responder, the base model, reference models and RAM2C team
  variants on the same held-out prompts, HTS pairwise judging of the comparisons of the RAM2C
  paper's Tables 1-3 (:mod:`pipelines.evaluation.arms.tutoring`).

Returns the metrics (the stage writes ``<reports_dir>/metrics.json``)::

    {"offline_default": bool,
     "tagging": {"base": {metric: value}, "tuned": {...}, "n", "provenance", "models", ...},
     "kgc": {"base": {...}, "tuned": {...}, "n", "provenance", "datasets", "rows", "reference", ...},
     "tutoring": {"hts": {"tables": {"1" | "2" | "3": {"rows": {one per comparison}, "provenance",
                  "position_preference", ...}}, "raters", ...}, "n", "prompts", "systems", "comparisons", ...},
     "deltas": [bootstrap.delta_row rows], "deltas_provenance": str,
     "systems": [...], "seconds": {system: s, "all": s}, "bootstrap": {...}}

and writes ``<reports_dir>/tables.md`` (the report's own tables of these sections). The systems run
at the same time, and so do the base and tuned arms of tagging and KGC
(:mod:`pipelines.evaluation.together`): each system's ``seconds`` overlap, ``all`` is the wall time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.arms.kgc import evaluate_kgc
from pipelines.evaluation.arms.tagging import evaluate_tagging
from pipelines.evaluation.arms.tuned import offline_default, require_adapter
from pipelines.evaluation.arms.tutoring import evaluate_tutoring
from pipelines.evaluation.report.summary import OFFLINE_BANNER, build_sections
from pipelines.evaluation.together import run_together
from pipelines.io import atomic_open
from pipelines.reporting.render import SummaryHeader, summary_markdown

log = logging.getLogger(__name__)
SECTION_OF = {"tagging": "tagging", "kgc": "kgc", "tutoring": "ram2c"}
"""The params section each system's base setup comes from."""
ADAPTER_OF = {"tagging": "sft", "kgc": "sft", "tutoring": "dpo"}


TEAM_SECTIONS = ("build_kb", "retrieval")
"""What a tutoring team system reads besides ``ram2c``: the team's knowledge bases."""


def needed_sections(cfg: EvaluateConfig) -> list[str]:
    """The generate sections the chosen systems read (``tagging``, ``kgc``, ``ram2c``), and
    ``build_kb`` / ``retrieval`` when a tutoring system that runs is a RAM2C team."""
    team = "tutoring" in cfg.systems and cfg.tutoring.needs_team()
    return [SECTION_OF[s] for s in cfg.systems] + (list(TEAM_SECTIONS) if team else [])


def check_adapters(cfg: EvaluateConfig, root: Path) -> None:
    """Fail before any run when an adapter a chosen system needs is missing (names the train stage)."""
    for system in cfg.systems:
        if system == "tutoring" and "tuned" not in cfg.tutoring.compared():
            continue  # tables of other systems only (e.g. Table 3: team variants)
        if getattr(cfg, system).tuned_backend is None:
            method = ADAPTER_OF[system]
            require_adapter(root / getattr(cfg, f"{method}_adapter"), method=method)


def tables_markdown(metrics: dict[str, Any]) -> str:
    """``tables.md``: the report's tables of these metrics (same builders as ``reports/summary.md``)."""
    view = {k: metrics[k] for k in ("offline_default", "tagging", "kgc", "deltas", "deltas_provenance") if k in metrics}
    if "tutoring" in metrics:
        view["hts"] = metrics["tutoring"]["hts"]
    banner = OFFLINE_BANNER if metrics.get("offline_default") else ""
    return summary_markdown(build_sections(view), [], SummaryHeader("Tuned vs base inside the systems", banner=banner))


async def evaluate_async(cfg: EvaluateConfig, sections: dict[str, Any], root: Path | str = ".") -> dict[str, Any]:
    """Run the chosen systems at the same time (each loads and frees its models; local CPU models
    share the cores, :mod:`pipelines.llm.cpu_threads`); a system that fails cancels the others."""
    root = Path(root)
    check_adapters(cfg, root)
    runners = {"tagging": evaluate_tagging, "kgc": evaluate_kgc, "tutoring": evaluate_tutoring}
    seconds: dict[str, float] = {}

    async def run(system: str) -> dict[str, Any]:
        start = time.perf_counter()
        extra = {}
        if system == "tutoring" and all(k in sections for k in TEAM_SECTIONS):
            extra["kb"] = tuple(sections[k] for k in TEAM_SECTIONS)
        result = await runners[system](sections[SECTION_OF[system]], cfg, root=root, **extra)
        seconds[system] = round(time.perf_counter() - start, 1)
        log.info("evaluate: %s done in %.0f s (%d held-out items)", system, seconds[system], result["section"]["n"])
        return result

    start = time.perf_counter()
    results = await run_together({system: run(system) for system in cfg.systems})
    seconds["all"] = round(time.perf_counter() - start, 1)
    metrics = {system: result["section"] for system, result in results.items()}
    deltas = [row for result in results.values() for row in result["deltas"]]
    specs = [spec for result in results.values() for spec in result["specs"]]
    b = cfg.bootstrap
    metrics = {
        "offline_default": offline_default(specs),
        **metrics,
        "deltas": deltas,
        "deltas_provenance": (
            "held-out items of each system (tagging evaluation split, KGC sentences without SFT rows, tutoring "
            f"prompts outside the DPO train split), paired by item; percentile bootstrap, {b.resamples} resamples, "
            f"seed {b.seed}; tutoring rows: HTS score of the tuned replies vs parity (50)"
        ),
        "systems": list(cfg.systems),
        "seconds": seconds,
        "bootstrap": b.model_dump(),
    }
    with atomic_open(root / cfg.outputs.reports_dir / "tables.md") as handle:
        handle.write(tables_markdown(metrics))
    return metrics


def evaluate(cfg: EvaluateConfig, sections: dict[str, Any], root: Path | str = ".") -> dict[str, Any]:
    """Run the stage; returns the metrics (the stage writes them to ``<reports_dir>/metrics.json``)."""
    return asyncio.run(evaluate_async(cfg, sections, root))
