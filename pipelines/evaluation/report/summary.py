"""``reports/summary.md`` and the self-contained ``reports/summary.html``, with the PNG plots
under ``reports/plots/``, all generated from one metrics dict::

    {
      "offline_default": true,              # labels every table and the page as the offline default
      "tagging": {...}, "kgc": {...}, "ram2c": {...}, "hts": {...},
      "base_tuned": {team: {...}}, "deltas": [...], "training": {...},
      "ablations": {"experiments", "tables"},      # reports/ablations.json of the queued ablation set
      "shortfalls": {stage: [{"what", "requested", "produced", "cause"}]},   # a table first, and in notes
      "missing": [{"what", "why", "command"}],      # papers' comparisons not run (report.missing), a table
      "stamp": {"commit", "dirty", "params_digest", "made", ...},          # a line under the title
      "traces_link": "traces.html",                                        # linked under the title
      "human": {"link": "evaluate/human/form.html", "note": "..."},         # the rating pack, linked too
      "inputs": {name: {"path", "found", "note"}}   # what the report read (a table at the end)
    }

(section shapes: :mod:`pipelines.reporting.tables`). Missing sections are left out, so
the report can be built from whatever stages ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.agents.shortfalls import shortfall_line
from pipelines.evaluation.report.missing import missing_table
from pipelines.evaluation.report.stamp import stamp_line
from pipelines.io import atomic_open
from pipelines.reporting import plots as report_plots
from pipelines.reporting import tables as report_tables
from pipelines.reporting.render import SummaryHeader, summary_html, summary_markdown
from pipelines.reporting.tables import Table

OFFLINE_BANNER = (
    "Offline default: these numbers come from the offline default run (small CPU models, demo data). "
    "They check the pipeline end to end; they are not comparable to the papers' results."
)


SHORTFALL_SECTIONS = {
    "generate_tagging": "Knowledge tagging",
    "generate_kgc": "Knowledge graph construction",
    "generate_ram2c": "Tutoring dialogue generation (RAM2C)",
    "evaluate": "Tuned vs base",
}  # train@<run> -> "Fine-tuning"


def shortfalls_table(shortfalls: Mapping[str, list[Mapping[str, Any]]]) -> Table:
    """Every shortfall the stages recorded: what was requested, what was produced, and why."""
    rows = [
        [stage, str(r.get("what", "")), "-" if r.get("requested") is None else str(r["requested"]),
         "-" if r.get("produced") is None else str(r["produced"]), str(r.get("cause") or "-")]
        for stage, found in shortfalls.items()
        for r in found
    ]  # fmt: skip
    return Table(
        "Shortfalls: requested vs produced",
        ["Stage", "What", "Requested", "Produced", "Cause"],
        rows,
        "Each is also a WARNING in its stage's log and a note under the table it concerns.",
    )


def _flag_notes(sections: list[tuple[str, list[Table]]], shortfalls: Mapping[str, list[Mapping[str, Any]]]) -> None:
    """Append each stage's shortfalls to the note of the first table of its section."""
    by_heading: dict[str, list[str]] = {}
    for stage, found in shortfalls.items():
        heading = "Fine-tuning" if stage.startswith("train@") else SHORTFALL_SECTIONS.get(stage)
        by_heading.setdefault(heading or "", []).extend(shortfall_line(r) for r in found)
    for heading, tables in sections:
        if by_heading.get(heading) and tables:
            tables[0].note = f"{tables[0].note} Shortfall: {'; '.join(by_heading[heading])}.".strip()


def build_sections(metrics: Mapping[str, Any]) -> list[tuple[str, list[Table]]]:
    """``[(heading, tables)]`` for the sections present in ``metrics``."""
    offline = bool(metrics.get("offline_default"))
    sections: list[tuple[str, list[Table]]] = []
    shortfalls = {stage: rows for stage, rows in (metrics.get("shortfalls") or {}).items() if rows}
    if shortfalls:
        sections.append(("Shortfalls", [shortfalls_table(shortfalls)]))
    if metrics.get("missing"):
        sections.append(("Missing comparisons", [missing_table(metrics["missing"])]))
    if "tagging" in metrics:
        sections.append(("Knowledge tagging", [report_tables.tagging_table(metrics["tagging"], offline=offline)]))
    if "kgc" in metrics:
        kgc = metrics["kgc"]
        tables = [report_tables.kgc_table(kgc, offline=offline)] if "rows" in kgc else []
        if kgc.get("ee"):
            tables.append(report_tables.kgc_ee_table(kgc, offline=offline))
        if kgc.get("rounds"):
            tables.append(report_tables.kgc_rounds_table(kgc, offline=offline))
        sections.append(("Knowledge graph construction", tables))
    if "ram2c" in metrics:
        sections.append(
            ("Tutoring dialogue generation (RAM2C)", report_tables.ram2c_tables(metrics["ram2c"], offline=offline))
        )
    if "hts" in metrics:
        sections.append(("Tutoring dialogues (HTS)", report_tables.hts_tables(metrics["hts"], offline=offline)))
    tuned = [
        report_tables.base_tuned_table(t, s, offline=offline) for t, s in (metrics.get("base_tuned") or {}).items()
    ]
    for table in tuned:  # the same metric as a generation table above, on other items by design
        table.note += (" The base model's scores here need not equal the generation tables above: those score the"
                       " generation run's items, these the held-out items that no model was trained on.")  # fmt: skip
    if metrics.get("deltas"):
        provenance = metrics.get("deltas_provenance", "held-out splits of each team's data, paired by item")
        tuned.append(report_tables.deltas_table(metrics["deltas"], provenance=provenance, offline=offline))
    if tuned:
        sections.append(("Tuned vs base", tuned))
    if "training" in metrics:
        sections.append(("Fine-tuning", [report_tables.training_table(metrics["training"], offline=offline)]))
    ablations = (metrics.get("ablations") or {}).get("tables") or []
    if ablations:
        tables = [Table(**{**t, "groups": [tuple(g) for g in t.get("groups", [])]}) for t in ablations]
        sections.append(("Ablations (dvc experiments)", tables))
    _flag_notes(sections, shortfalls)
    if metrics.get("inputs"):
        sections.append(("Report inputs", [report_tables.inputs_table(metrics["inputs"])]))
    return sections


def write_plots(metrics: Mapping[str, Any], folder: Path | str) -> list[Path]:
    """The plots for the sections present (tagging P/R/F1, KGC F1 per round, HTS scores with
    intervals, training loss); returns their paths."""
    folder = Path(folder)
    plots = []
    if "tagging" in metrics:
        plots.append(report_plots.tagging_plot(folder / "tagging_prf1.png", metrics["tagging"]))
    if metrics.get("kgc", {}).get("rounds"):
        plots.append(report_plots.kgc_rounds_plot(folder / "kgc_f1_rounds.png", metrics["kgc"]))
    if metrics.get("hts", {}).get("tables"):
        plots.append(report_plots.hts_plot(folder / "hts_scores.png", metrics["hts"]))
    if metrics.get("training", {}).get("runs"):
        plots.append(report_plots.training_loss_plot(folder / "training_loss.png", metrics["training"]))
    return plots


def write_summary(
    metrics: Mapping[str, Any], reports_dir: Path | str, *, title: str = "edumas results"
) -> dict[str, Any]:
    """Write ``summary.md``, ``summary.html`` and ``plots/*.png`` into ``reports_dir``;
    returns ``{"markdown": path, "html": path, "plots": [paths]}``."""
    reports_dir = Path(reports_dir)
    sections = build_sections(metrics)
    plots = write_plots(metrics, reports_dir / "plots")
    banner = OFFLINE_BANNER if metrics.get("offline_default") else ""
    human = metrics.get("human") or {}
    header = SummaryHeader(title, stamp_line(metrics.get("stamp")), metrics.get("traces_link"), banner,
                           human.get("link"), human.get("note", ""))  # fmt: skip
    with atomic_open(reports_dir / "summary.md") as handle:
        handle.write(summary_markdown(sections, plots, header))
    with atomic_open(reports_dir / "summary.html") as handle:
        handle.write(summary_html(sections, plots, header))
    return {"markdown": reports_dir / "summary.md", "html": reports_dir / "summary.html", "plots": plots}
