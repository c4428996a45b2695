"""The whole report from whatever stages ran: read every input present, map it into the summary's
sections (:mod:`report_inputs`), write ``summary.md``, ``summary.html``, ``plots/*.png`` and the
plot CSVs, and ``traces.html``. A missing or unreadable input is a row of the report's inputs
table (and of the returned metrics), never an error.

    metrics = build_report(cfg, params, root=".")   # cfg: ReportConfig, params: the whole params.yaml
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pipelines.agents.shortfalls import flag_shortfalls, flat_shortfall
from pipelines.evaluation.report import inputs as ri
from pipelines.evaluation.report.config import ReportConfig
from pipelines.evaluation.report.missing import ABLATIONS_COMMAND, missing_comparisons
from pipelines.evaluation.report.plot_data import plot_rows, write_plot_data
from pipelines.evaluation.report.stage_shortfalls import build_kb_shortfalls, make_datasets_shortfalls
from pipelines.evaluation.report.stamp import report_stamp
from pipelines.evaluation.report.summary import build_sections, write_summary
from pipelines.evaluation.traces.browser import read_records, write_trace_browser
from pipelines.evaluation.traces.evaluate import evaluate_teams
from pipelines.evaluation.traces.story import esc
from pipelines.io import atomic_open
from pipelines.reporting.tables import tagging_section
from pipelines.tagging.data import TaggingDataConfig, read_examples
from pipelines.training.summary import read_loss_csv

log = logging.getLogger(__name__)

STAGES = {"tagging": "generate_tagging", "kgc": "generate_kgc", "kgc_rounds": "generate_kgc",
          "ram2c": "generate_ram2c", "evaluate": "evaluate", "make_datasets": "make_datasets",
          "build_kb": "build_kb"}  # fmt: skip
FIXES = {"ablations": ABLATIONS_COMMAND}  # inputs no stage writes


class _Inputs:
    """Reads inputs under ``root`` and records each one's status for the inputs table."""

    def __init__(self, root: Path) -> None:
        self.root, self.status = root, {}

    def read(self, name: str, path: str, stage: str, parse: Callable[[Path], Any]) -> Any:
        file = self.root / path
        if not file.exists():
            fix = FIXES.get(name, f"dvc repro {stage}")
            self.status[name] = {"path": path, "found": False, "note": f"missing: run `{fix}`"}
            return None
        try:
            value = parse(file)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:  # a corrupt file is a note, not a crash
            log.warning("report: %s (%s) could not be read: %s", name, path, exc)
            self.status[name] = {"path": path, "found": False, "note": f"unreadable: {type(exc).__name__}: {exc}"}
            return None
        self.status[name] = {"path": path, "found": True}
        return value


def _json(path: Path) -> Any:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data


def _renderable(sections: dict[str, Any]) -> dict[str, Any]:
    """``sections`` after building their tables and plot rows once: a shape the report cannot
    lay out raises here, inside the input's read, and becomes that input's note."""
    build_sections(sections)
    plot_rows(sections)
    return sections


def collect_metrics(cfg: ReportConfig, params: Mapping[str, Any], *, root: Path | str = ".") -> dict[str, Any]:
    """The metrics dict :func:`summary.write_summary` takes, with ``offline_default``, ``inputs``,
    ``shortfalls`` (``{stage: rows}``, as each stage recorded them) and ``stamp``."""
    inputs, paths = _Inputs(Path(root)), cfg.inputs
    metrics: dict[str, Any] = {}
    shortfalls: dict[str, list[dict]] = {}

    def read(name: str, path: str, build: Callable[[dict], dict[str, Any]]) -> None:
        def parse(file: Path) -> dict[str, Any]:
            raw = _json(file)
            section = _renderable(build(raw))
            if raw.get("shortfalls"):
                shortfalls[STAGES.get(name, name)] = list(raw["shortfalls"])
            return section

        metrics.update(inputs.read(name, path, STAGES.get(name, name), parse) or {})

    def models(section: str) -> str:
        return ri.models_named(params, section)

    read("tagging", paths.tagging, lambda m: {"tagging": tagging_section(m, models=models("tagging"))})
    rounds = inputs.read("kgc_rounds", paths.kgc_rounds, "generate_kgc", lambda p: p)  # parsed with kgc below
    read("kgc", paths.kgc, lambda m: {"kgc": ri.kgc_section(m, models=models("kgc"), rounds_csv=rounds,
                                                           demo=ri.kgc_demo_sets(params, m))})  # fmt: skip
    read("ram2c", paths.ram2c, lambda m: {"ram2c": ri.ram2c_section(m, models=models("ram2c"))})
    runs = {}
    for run, folder in cfg.inputs.train.items():
        stage = f"train@{run}"
        run_metrics = inputs.read(f"train.{run}", f"{folder}/metrics.json", stage, _json)
        loss = inputs.read(f"train.{run}.loss", f"{folder}/loss.csv", stage, read_loss_csv)
        if run_metrics is not None or loss:
            runs[run] = ri.training_run(run, run_metrics or {}, loss or [], params)
            method = runs[run]["method"].split()[0]
            flat = flat_shortfall(f"{method} loss", [v for _, v in loss or []], unit="logged step")
            if flat is not None:  # from loss.csv, so an older run's metrics without shortfalls are flagged too
                shortfalls[stage] = flag_shortfalls(f"report ({stage})", [flat])
    if runs:
        metrics["training"] = ri.training_section(runs)
    evaluated_offline: list[bool] = []
    packs: list[dict] = []

    def evaluate(m: dict) -> dict[str, Any]:
        evaluated_offline.append(bool(m.get("offline_default")))
        packs.extend([(m.get("tutoring") or {})["human"]] if (m.get("tutoring") or {}).get("human") else [])
        return ri.evaluate_sections(m)

    read("evaluate", paths.evaluate, evaluate)
    derived = {"make_datasets": (paths.make_datasets, make_datasets_shortfalls),
               "build_kb": (paths.build_kb, lambda m: build_kb_shortfalls(m, params))}  # fmt: skip
    for name, (path, derive) in derived.items():  # stages whose own metrics hold no shortfalls: derived here

        def parse(file: Path, name: str = name, derive: Callable = derive) -> list[dict]:
            return flag_shortfalls(name, derive(_json(file)))

        found = inputs.read(name, path, name, parse)
        if found:
            shortfalls[name] = found
    read("ablations", paths.ablations, lambda m: {"ablations": m} if m.get("tables") else {})
    if inputs.status.get("ablations", {}).get("found") and "ablations" not in metrics:  # a file with no experiment
        inputs.status["ablations"] = {"path": paths.ablations, "found": False,
                                      "note": f"empty: no experiment recorded; run `{ABLATIONS_COMMAND}`"}  # fmt: skip
    metrics["offline_default"] = ri.offline_default(params, cfg.generators) or any(evaluated_offline)
    metrics["shortfalls"] = shortfalls
    metrics["missing"] = missing_comparisons(metrics, params)
    metrics["inputs"] = inputs.status
    metrics["stamp"] = report_stamp(params, root=root)
    metrics["traces_link"] = os.path.relpath(cfg.outputs.traces_html, cfg.outputs.reports_dir)
    if packs:
        metrics["human"] = human_link(packs[0], cfg.outputs.reports_dir)
    return metrics


def human_link(pack: Mapping[str, Any], reports_dir: str) -> dict[str, str]:
    """The rating pack evaluate wrote (``metrics["tutoring"]["human"]``) as the summary's link and note."""
    rows = pack.get("rows_per_rater") or {}
    note = (f"blind sheets for {len(pack.get('raters') or rows)} raters ({', '.join(pack.get('raters') or rows)}), "
            f"{max(rows.values(), default=0)} rows each, identical replies filled in as equal; "
            f"import the filled sheets: {pack.get('import', 'python -m pipelines.evaluation.human.pack')}")  # fmt: skip
    return {"link": os.path.relpath(f"{pack['folder']}/form.html", reports_dir), "note": note}


def _prune(folder: Path, keep: set[Path]) -> None:
    """Remove plot files of sections no longer present (a direct rerun; DVC clears outs itself)."""
    for stale in folder.glob("*"):
        if stale.suffix in (".png", ".csv") and stale not in keep:
            stale.unlink()


def tagging_texts(params: Mapping[str, Any], root: Path) -> dict[str, dict[str, str]]:
    """``{pair id: {"question", "definition"}}`` from the tagging data params name ({} when it
    cannot be read: the browser then shows the label and split without the texts)."""
    try:
        data = TaggingDataConfig.model_validate(((params.get("tagging") or {}).get("data")) or {})
        return {e.id: {"question": e.question, "definition": e.definition} for e in read_examples(data, root)}
    except (OSError, ValueError) as exc:  # a missing or unreadable data file, or bad params: no texts
        log.warning("report: the tagging pairs' texts are not shown in the trace browser: %s", exc)
        return {}


def write_traces(cfg: ReportConfig, params: Mapping[str, Any] | None = None, *, root: Path | str = ".") -> dict:
    """``traces.html`` from the teams' traces present (a page saying none were found otherwise);
    returns per-team stats and the missing files. The tagging records get their pair's question
    and definition from the tagging data of ``params``."""
    root = Path(root)
    found: dict[str, Any] = {team: root / path for team, path in cfg.traces.items() if (root / path).exists()}
    missing = [path for team, path in cfg.traces.items() if team not in found]
    target = root / cfg.outputs.traces_html
    present = {team: root / path for team, path in cfg.records.items() if team in found and (root / path).exists()}
    records: dict[str, Any] = {team: read_records(path) for team, path in present.items()}
    if "tagging" in records and params is not None:
        texts = tagging_texts(params, root)
        records["tagging"] = {i: {**texts.get(i, {}), **row} for i, row in records["tagging"].items()}
    if cfg.evaluate_traces is not None:  # the evaluate stage's teams after the generation teams
        evaluated, evaluated_records = evaluate_teams(root / cfg.evaluate_traces)
        found.update(evaluated)
        records.update(evaluated_records)
    if found:
        stats = write_trace_browser(
            target, found, limit=cfg.trace_limit, seed=cfg.trace_seed, title=f"{cfg.title}: traces", records=records
        )
    else:
        stats = {}
        with atomic_open(target) as handle:
            handle.write(
                f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(cfg.title)}: traces</title>'
                f"</head><body><h1>No traces yet</h1><p>None of these files exist: {esc(', '.join(missing))}. "
                "Run the generate stages (dvc repro) and the report again.</p></body></html>\n"
            )
    return {"teams": stats, "missing": missing}


def build_report(cfg: ReportConfig, params: Mapping[str, Any], *, root: Path | str = ".") -> dict[str, Any]:
    """Write every report file; returns the stage's metrics: ``offline_default``, ``inputs``
    (name -> found), ``sections``, ``plots``, ``traces`` (team -> samples / shown)."""
    root = Path(root)
    metrics = collect_metrics(cfg, params, root=root)
    reports_dir = root / cfg.outputs.reports_dir
    written = write_summary(metrics, reports_dir, title=cfg.title)
    csvs = write_plot_data(metrics, reports_dir / "plots")
    _prune(reports_dir / "plots", {*written["plots"], *csvs})
    traces = write_traces(cfg, params, root=root)
    return {
        "offline_default": metrics["offline_default"],
        "inputs": {name: s["found"] for name, s in metrics["inputs"].items()},
        "sections": [heading for heading, _ in build_sections(metrics)],
        "plots": sorted(p.name for p in [*written["plots"], *csvs]),
        "traces": {t: {"samples": s["samples"], "shown": s["shown"]} for t, s in traces["teams"].items()},
        "traces_missing": traces["missing"],
        "human_pack": (metrics.get("human") or {}).get("link"),
        "shortfalls": sum(len(rows) for rows in metrics["shortfalls"].values()),
        "missing": [row["what"].partition(":")[0] for row in metrics["missing"]],
        "params_digest": metrics["stamp"]["params_digest"],
    }
