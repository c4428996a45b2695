"""DVC stage ``evaluate``: the fine-tuned models back inside the three systems, against the base model.

Reads the ``evaluate`` section of params.yaml (see :class:`pipelines.evaluation.arms.config.EvaluateConfig`)
and, for each system in ``evaluate.systems``, that system's generate section (``tagging``, ``kgc``,
``ram2c``: the base setup); runs :func:`pipelines.evaluation.evaluate.evaluate` and writes:

- ``reports/evaluate/metrics.json`` (tuned vs base per system, bootstrap deltas) and ``tables.md``;
- ``data/evaluate/<system>/{base,tuned}/`` traces and predictions (tagging, KGC); ``data/evaluate/tutoring/``:
  ``prompts.jsonl``, ``replies/<system>/`` and ``comparisons/<system>_vs_<baseline>/`` (judgments, traces);
- ``reports/evaluate/human/``: the human rating pack when ``evaluate.tutoring.human`` is set (the
  default), else a README saying there is none (the folder is a DVC out).

    python -m stages.evaluate [--params params.yaml] [--section evaluate] [--debug]

Exit codes: 0 done; 1 a missing adapter (names the train stage) or input, an empty held-out set,
an LLM failure (an unreachable backend or judge at preflight), more failed replies or unscored
judgments than ``max_failed_share`` (names the failures file); 2 bad params.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipelines.agents.shortfalls import count_shortfall, flag_shortfalls
from pipelines.config import load_section
from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.evaluate import evaluate, needed_sections
from pipelines.io import atomic_open
from pipelines.kgc.config import KGCConfig
from pipelines.ram2c.config import Ram2cConfig
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.stage import run_stage, stage_setup_sections, write_metrics
from pipelines.tagging.config import TaggingConfig
from pipelines.tracking import stage_run

log = logging.getLogger("edumas")
NO_PACK_FOLDER = "reports/evaluate/human"  # the human rating pack's folder in dvc.yaml (evaluate.tutoring.human)
NO_PACK = (
    "No human rating pack in this run: evaluate.tutoring.human is null or the tutoring system did not run.\n"
    "Set it in params.yaml (e.g. {raters: [Ann, Bo, Cy], sample: 25}) and run `dvc repro evaluate`.\n"
)


def section_models() -> dict:
    return {
        "tagging": TaggingConfig,
        "kgc": KGCConfig,
        "ram2c": Ram2cConfig,
        "build_kb": BuildKBConfig,  # a reference_team tutoring baseline's knowledge bases
        "retrieval": RetrievalConfig,
    }


def summary_line(metrics: dict) -> str:
    parts = []
    for r in metrics["deltas"]:
        interval = f"[{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]" if r.get("ci") else r.get("ci_note") or "no interval"
        parts.append(
            f"{r['team']} {r['metric']}: base {r['base']:.3f} tuned {r['tuned']:.3f} "
            f"delta {r['delta']:+.3f} {interval} (n={r['n']})"
        )
    return "evaluate: " + "; ".join(parts)


def shortfalls(cfg: EvaluateConfig, metrics: dict) -> list:
    """Held-out items evaluated vs requested per system, and tutoring replies that failed."""
    tutoring = metrics.get("tutoring") or {}
    counts = tutoring.get("prompts") or {}  # {"requested", "evaluated", ...} as the tutoring arm counted them
    prompts = counts.get("evaluated", tutoring.get("n"))
    found = [
        count_shortfall("tagging held-out pairs", cfg.tagging.items, (metrics.get("tagging") or {}).get("n"),
                        cause="the evaluation split holds no more unseen pairs"),
        count_shortfall("tutoring held-out prompts", counts.get("requested", cfg.tutoring.items), prompts,
                        cause="prompts outside the DPO train split"),
    ]  # fmt: skip
    for arm, failed in (tutoring.get("failed_replies") or {}).items():
        replied = None if prompts is None else prompts - failed
        found.append(count_shortfall(f"tutoring replies of the {arm} model", prompts, replied, cause="did not parse"))
    return found


def _run(argv: list[str] | None) -> int:
    args, cfgs = stage_setup_sections("evaluate", {"evaluate": EvaluateConfig}, argv)
    cfg = cfgs["evaluate"]
    models = section_models()
    sections = {name: load_section(name, models[name], Path(args.params)) for name in needed_sections(cfg)}
    with stage_run("evaluate", cfg.model_dump()) as run:
        metrics = evaluate(cfg, sections)
        metrics["shortfalls"] = flag_shortfalls("evaluate", shortfalls(cfg, metrics))
        if not (metrics.get("tutoring") or {}).get("human"):  # dvc.yaml's out exists either way
            with atomic_open(Path(NO_PACK_FOLDER) / "README.md") as handle:
                handle.write(NO_PACK)
        write_metrics(Path(cfg.outputs.reports_dir) / "metrics.json", metrics, run)
    log.info("%s", summary_line(metrics))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit code 0, 2 (bad params) or 1 (one ``error: ...`` line; ``--debug`` adds the traceback)."""
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
