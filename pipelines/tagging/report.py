"""The human-facing outputs of the stage: ``table.md``, the Table 4 layout the summary report shows
too (:func:`pipelines.reporting.tables.tagging_table`: rows metric x model size, the
model named per row, a column per method), and a PNG bar chart of the same scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.io import atomic_open
from pipelines.reporting.plots import legend_outside, save_figure
from pipelines.reporting.render import table_markdown
from pipelines.reporting.tables import tagging_section, tagging_table

SYSTEM_NAMES = {
    "embedding": "Embedding similarity",
    "plm": "PLM fine-tuning",
    "single_llm": "Single LLM (few-shot CoT)",
    "team": "Multi-agent team",
}
COLUMNS = ("accuracy", "precision", "recall", "f1")


def write_table(path: Path | str, metrics: dict[str, Any]) -> None:
    """``table.md`` of a run's metrics: the summary report's tagging table, rendered as Markdown."""
    with atomic_open(path) as handle:
        handle.write(table_markdown(tagging_table(tagging_section(metrics))))


def write_plot(path: Path | str, systems: dict[str, dict[str, Any]]) -> None:
    """Grouped bars: one group per metric (and coverage), one bar per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = (*COLUMNS, "coverage")
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=120)
    width = 0.8 / max(1, len(systems))
    for i, (name, m) in enumerate(systems.items()):
        xs = [j + i * width for j in range(len(columns))]
        method = SYSTEM_NAMES.get(m.get("method", name), name)
        label = f"{method} ({m.get('backbone', '')})".replace(" ()", "")
        ax.bar(xs, [m["overall"].get(c, 1.0) for c in columns], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(columns))], [c.capitalize() for c in columns])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (0-1)")
    ax.set_title("Knowledge tagging")
    legend_outside(ax)  # beside the axes: it covers no bar (Coverage's included)
    save_figure(fig, path)
