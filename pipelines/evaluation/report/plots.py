"""The report's PNG plots, one function each, from the same metrics sections as the tables
(:mod:`pipelines.evaluation.report.tables` documents their shapes). Each writes ``path``
atomically and returns it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.evaluation.report.tables import HTS_COLUMNS, SYSTEM_NAMES
from pipelines.io import atomic_open


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path | str) -> Path:
    plt = _pyplot()
    fig.tight_layout()
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png")
    plt.close(fig)
    return Path(path)


def tagging_plot(path: Path | str, section: Mapping[str, Any], *, title: str = "Knowledge tagging") -> Path:
    """Grouped bars: precision, recall and F1 of every (model, system)."""
    plt = _pyplot()
    models = section.get("models") or {"model": {"systems": section["systems"]}}
    bars = [
        (f"{SYSTEM_NAMES.get(s, s)} · {model}", r["overall"])
        for model, result in models.items()
        for s, r in result["systems"].items()
    ]
    metrics = ("precision", "recall", "f1")
    fig, ax = plt.subplots(figsize=(8, 3.8), dpi=110)
    width = 0.8 / max(1, len(bars))
    for i, (label, overall) in enumerate(bars):
        ax.bar([j + i * width for j in range(len(metrics))], [overall.get(m, 0) for m in metrics], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(metrics))], ["Precision", "Recall", "F1"])
    ax.set_ylim(0, 1)
    ax.set_ylabel("score")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def kgc_rounds_plot(path: Path | str, section: Mapping[str, Any], *, title: str = "KGC F1 per round") -> Path:
    """One line per series (task or dataset): F1 against the collaboration round."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
    for series, values in section["rounds"].items():
        ax.plot(range(len(values)), [100 * v for v in values], marker="o", label=series)
    ax.set_xlabel("round")
    ax.set_ylabel("F1 (%)")
    ax.set_title(title)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8)
    return _save(fig, path)


def hts_plot(path: Path | str, section: Mapping[str, Any], *, title: str = "HTS scores (50 = parity)") -> Path:
    """Grouped bars per comparison with H / T / S scores and bootstrap-interval error bars."""
    plt = _pyplot()
    rows = [(label, dims) for table in section["tables"].values() for label, dims in table["rows"].items()]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(rows)), 3.8), dpi=110)
    width = 0.8 / len(HTS_COLUMNS)
    for k, (dimension, letter) in enumerate(HTS_COLUMNS):
        xs, ys, errors = [], [], [[], []]
        for i, (_, dims) in enumerate(rows):
            result = dims.get(dimension) or {}
            if result.get("score") is None:
                continue
            low, high = result.get("ci") or (result["score"], result["score"])
            xs.append(i + k * width)
            ys.append(result["score"])
            errors[0].append(result["score"] - low)
            errors[1].append(high - result["score"])
        ax.bar(xs, ys, width, yerr=errors, capsize=3, label=letter)
    ax.axhline(50, color="grey", linestyle="--", linewidth=1)
    ticks = [i + 0.4 - width / 2 for i in range(len(rows))]
    ax.set_xticks(ticks, [label for label, _ in rows], fontsize=7, rotation=15)
    ax.set_ylim(0, 100)
    ax.set_ylabel("score")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def training_loss_plot(path: Path | str, section: Mapping[str, Any], *, title: str = "Training loss") -> Path:
    """One line per run: loss against the step (``runs: {name: {"loss": [[step, loss], ...]}}``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
    for run, result in section["runs"].items():
        points = result.get("loss", [])
        ax.plot([s for s, _ in points], [v for _, v in points], label=run)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)
