"""The report's PNG plots, one figure builder each, from the same metrics sections as the tables
(:mod:`pipelines.reporting.tables` documents their shapes). ``*_figure`` returns the
matplotlib figure (tests read its axes), ``*_plot`` writes it to ``path`` atomically and returns
the path.

What every plot does so a person can read it: axes that fit the data (rates on 0-1 or 0-100,
never an autoscaled band around an all-zero series), integer ticks for rounds and steps, the
legend outside the drawing area, each bar labelled with its value and a missing value written
as "n/a" where its bar would be (so a zero bar and a missing one differ), intervals drawn as
black error bars, and training runs on axes of their own (SFT and DPO losses differ in scale).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.io import atomic_open
from pipelines.reporting.tables import HTS_COLUMNS, SYSTEM_NAMES

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path | str) -> Path:
    """Write ``fig`` as PNG (legends outside the axes are kept: tight bounding box) and close it."""
    plt = _pyplot()
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def figure_unless_shard(path: Path, draw: Callable[[Path], Any], *, shard: bool) -> None:
    """``draw(path)``; a shard draws nothing (the merge draws the run's figure from the merged rows, and
    the shard process never imports matplotlib) and removes a figure an older run left at ``path``,
    which would not be this run's."""
    if shard:
        path.unlink(missing_ok=True)
    else:
        draw(path)


def legend_outside(ax, *, columns: int = 1) -> None:
    """The legend to the right of the axes, covering nothing."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, ncol=columns)


def integer_ticks(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def step_axis(ax, steps: Sequence[float]) -> None:
    """Integer step ticks on the x axis (one or two steps: room for ticks around them)."""
    if steps and max(steps) - min(steps) < 2:
        ax.set_xlim(min(steps) - 1, max(steps) + 1)
    integer_ticks(ax.xaxis)


def _label_bars(ax, xs: Sequence[float], values: Sequence[float | None], *, fmt: str, top: float) -> None:
    """Each bar's value above it; ``n/a`` at the baseline where a value is missing."""
    for x, value in zip(xs, values, strict=True):
        if value is None:
            ax.text(x, top * 0.01, "n/a", ha="center", va="bottom", fontsize=6, color="#a00", rotation=90)
        else:
            ax.text(x, value + top * 0.01, format(value, fmt), ha="center", va="bottom", fontsize=6)


def tagging_figure(section: Mapping[str, Any], *, title: str = "Knowledge tagging"):
    """Grouped bars: precision, recall and F1 of every (system, model), on 0-1."""
    plt = _pyplot()
    models = section.get("models") or {"model": {"systems": section["systems"]}}
    bars = [
        (f"{SYSTEM_NAMES.get(s, s)} · {model}", r.get("overall") or {})
        for model, result in models.items()
        for s, r in result["systems"].items()
    ]
    metrics = ("precision", "recall", "f1")
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    width = 0.8 / max(1, len(bars))
    for i, (label, overall) in enumerate(bars):
        xs = [j + i * width for j in range(len(metrics))]
        values = [overall.get(m) for m in metrics]
        ax.bar(xs, [v or 0 for v in values], width, label=label, edgecolor="black", linewidth=0.5)
        _label_bars(ax, xs, values, fmt=".2f", top=1.0)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(metrics))], ["Precision", "Recall", "F1"])
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("score (0-1)")
    ax.set_title(title)
    legend_outside(ax)
    return fig


def tagging_plot(path: Path | str, section: Mapping[str, Any], *, title: str = "Knowledge tagging") -> Path:
    return save_figure(tagging_figure(section, title=title), path)


def percent_axis_top(values: Sequence[float]) -> float:
    """The top of a 0-100 axis that shows ``values`` (in %): the next multiple of 10 above the
    largest with some room, at least 10 (an all-zero series sits on a readable 0-10 axis), at most 100."""
    largest = max([v for v in values if v is not None] or [0.0])
    return float(min(100, max(10, 10 * math.ceil(largest * 1.1 / 10))))


def kgc_rounds_figure(section: Mapping[str, Any], *, title: str = "KGC F1 per round"):
    """One line per series (system · dataset): F1 (%) against the collaboration round. Series
    that coincide stay visible through their own marker and line style."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.4), dpi=110)
    values = []
    for i, (series, f1s) in enumerate(section["rounds"].items()):
        points = [100 * v for v in f1s]
        values += points
        label = f"{series} (0 at every round)" if points and not any(points) else series
        ax.plot(range(len(points)), points, marker=MARKERS[i % len(MARKERS)], markersize=7 - i % 3,
                linestyle=LINESTYLES[i % len(LINESTYLES)], label=label)  # fmt: skip
    if values and not any(values):  # the lines lie on top of each other at 0: say so, the plot is not empty
        ax.text(0.5, 0.5, f"all {len(section['rounds'])} series: F1 0 at every round (lines overlap)",
                ha="center", va="center", transform=ax.transAxes, fontsize=8, color="#a00")  # fmt: skip
    ax.set_xlabel("round (0 = each expert alone)")
    ax.set_ylabel("F1 (%)")
    ax.set_ylim(0, percent_axis_top(values))
    integer_ticks(ax.xaxis)
    ax.set_title(title)
    legend_outside(ax)
    return fig


def kgc_rounds_plot(path: Path | str, section: Mapping[str, Any], *, title: str = "KGC F1 per round") -> Path:
    return save_figure(kgc_rounds_figure(section, title=title), path)


def hts_figure(section: Mapping[str, Any], *, title: str = "HTS scores (50 = parity)"):
    """Grouped bars per comparison with H / T / S scores on 0-100, bootstrap intervals as black
    error bars; a score without an interval is marked "no CI"."""
    plt = _pyplot()
    rows = [(label, dims) for table in section["tables"].values() for label, dims in table["rows"].items()]
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(rows)), 3.6), dpi=110)
    width = 0.8 / len(HTS_COLUMNS)
    for k, (dimension, letter) in enumerate(HTS_COLUMNS):
        xs = [i + k * width for i in range(len(rows))]
        scores = [(dims.get(dimension) or {}).get("score") for _, dims in rows]
        ax.bar(xs, [s or 0 for s in scores], width, label=letter, edgecolor="black", linewidth=0.5)
        _label_bars(ax, xs, scores, fmt=".1f", top=100.0)
        for x, (_, dims) in zip(xs, rows, strict=True):
            result = dims.get(dimension) or {}
            if result.get("score") is None:
                continue
            if result.get("ci"):
                low, high = result["ci"]
                ax.errorbar(x, result["score"], yerr=[[result["score"] - low], [high - result["score"]]],
                            fmt="none", ecolor="black", elinewidth=1.2, capsize=4)  # fmt: skip
            else:
                ax.text(x, 2, "no CI", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.axhline(50, color="grey", linestyle="--", linewidth=1, label="parity (50)")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))], [label for label, _ in rows], fontsize=7,
                  rotation=15)  # fmt: skip
    ax.set_ylim(0, 105)
    ax.set_ylabel("score (0-100)")
    ax.set_title(title)
    legend_outside(ax)
    return fig


def hts_plot(path: Path | str, section: Mapping[str, Any], *, title: str = "HTS scores (50 = parity)") -> Path:
    return save_figure(hts_figure(section, title=title), path)


def training_loss_figure(section: Mapping[str, Any], *, title: str = "Training loss"):
    """One panel per run (its own loss axis): loss against the optimizer step, integer steps."""
    plt = _pyplot()
    runs = list(section["runs"].items())
    fig, axes = plt.subplots(1, len(runs), figsize=(3.6 * len(runs), 3.2), dpi=110, squeeze=False)
    for ax, (run, result) in zip(axes[0], runs, strict=True):
        points = result.get("loss", [])
        ax.plot([s for s, _ in points], [v for _, v in points], marker="o", markersize=4)
        ax.set_title(f"{run} ({result.get('method', '')})".replace(" ()", ""), fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        step_axis(ax, [s for s, _ in points])
        if not points:
            ax.text(0.5, 0.5, "no loss logged", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title)
    return fig


def training_loss_plot(path: Path | str, section: Mapping[str, Any], *, title: str = "Training loss") -> Path:
    return save_figure(training_loss_figure(section, title=title), path)
