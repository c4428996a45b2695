"""Long-format CSVs of the report's plots, for ``dvc plots`` (one file per plot, fixed columns),
from the same metrics sections as :mod:`pipelines.reporting.plots`:

- ``tagging_prf1.csv``: ``series, model, system, metric, value`` (series = ``<system> · <model>``)
- ``kgc_f1_rounds.csv``: ``series, round, f1``
- ``hts_scores.csv``: ``series, dimension, score, low, high, kappa`` (series = the comparison)
- ``training_loss.csv``: ``series, step, loss`` (series = the run)

Every file has a ``series`` column: the templates of ``dvc plots`` (``.dvc/plots/edumas_*.json``,
named in ``dvc.yaml``) draw one line or bar per series, not one per revision only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.evaluation.human.sheets import write_csv
from pipelines.reporting.tables import SYSTEM_NAMES


def plot_rows(metrics: Mapping[str, Any]) -> dict[str, tuple[tuple[str, ...], list[dict[str, Any]]]]:
    """``{file name: (columns, rows)}`` for the sections present."""
    out: dict[str, tuple[tuple[str, ...], list[dict[str, Any]]]] = {}
    if "tagging" in metrics:
        section = metrics["tagging"]
        models = section.get("models") or {"model": {"systems": section["systems"]}}
        rows = [
            {"series": f"{SYSTEM_NAMES.get(s, s)} · {m}", "model": m, "system": s, "metric": k,
             "value": r["overall"][k]}
            for m, result in models.items()
            for s, r in result["systems"].items()
            for k in ("precision", "recall", "f1")
            if k in r["overall"]
        ]
        out["tagging_prf1.csv"] = (("series", "model", "system", "metric", "value"), rows)
    if metrics.get("kgc", {}).get("rounds"):
        rows = [
            {"series": s, "round": r, "f1": v}
            for s, values in metrics["kgc"]["rounds"].items()
            for r, v in enumerate(values)
        ]
        out["kgc_f1_rounds.csv"] = (("series", "round", "f1"), rows)
    if metrics.get("hts", {}).get("tables"):
        rows = []
        for table in metrics["hts"]["tables"].values():
            for label, dims in table["rows"].items():
                for dimension, result in dims.items():
                    if not result or result.get("score") is None:
                        continue
                    low, high = result.get("ci") or (None, None)
                    rows.append(
                        {"series": label, "dimension": dimension, "score": result["score"], "low": low,
                         "high": high, "kappa": result.get("kappa")}
                    )  # fmt: skip
        out["hts_scores.csv"] = (("series", "dimension", "score", "low", "high", "kappa"), rows)
    if metrics.get("training", {}).get("runs"):
        rows = [
            {"series": run, "step": step, "loss": loss}
            for run, result in metrics["training"]["runs"].items()
            for step, loss in result.get("loss", [])
        ]
        out["training_loss.csv"] = (("series", "step", "loss"), rows)
    return out


def write_plot_data(metrics: Mapping[str, Any], folder: Path | str) -> list[Path]:
    """Write the CSVs into ``folder`` (atomically); returns their paths."""
    paths = []
    for name, (columns, rows) in plot_rows(metrics).items():
        path = Path(folder) / name
        write_csv(path, rows, columns, bom=False)  # dvc reads the header; a BOM would rename column 1
        paths.append(path)
    return paths
