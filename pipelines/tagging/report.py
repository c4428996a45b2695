"""The human-facing outputs: a Markdown table laid out like the paper's Table 4 (systems x
metrics) and a PNG bar chart of the same numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.io import atomic_open

SYSTEM_NAMES = {
    "embedding": "Embedding similarity",
    "plm": "PLM fine-tuning",
    "single_llm": "Single LLM (few-shot CoT)",
    "team": "Multi-agent team",
}
COLUMNS = ("accuracy", "precision", "recall", "f1")


def markdown_table(systems: dict[str, dict[str, Any]]) -> str:
    """``| System | Accuracy | Precision | Recall | F1 | LLM calls/q | tokens/q | failed sub-tasks |``."""
    lines = [
        "| System | Accuracy | Precision | Recall | F1 | LLM calls / question | tokens / question | failed sub-tasks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in systems.items():
        cells = [f"{100 * m['overall'][c]:.1f}" for c in COLUMNS]
        cells += [
            f"{m.get('llm_calls_per_question', 0):.2f}",
            f"{m.get('tokens_per_question', 0):.0f}",
            str(m.get("failed_subtasks", 0)),
        ]
        lines.append(f"| {SYSTEM_NAMES.get(name, name)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table(path: Path | str, systems: dict[str, dict[str, Any]], *, title: str, note: str = "") -> None:
    with atomic_open(path) as handle:
        handle.write(f"# {title}\n\n{markdown_table(systems)}\n")
        if note:
            handle.write(note.rstrip() + "\n")


def write_plot(path: Path | str, systems: dict[str, dict[str, Any]]) -> None:
    """Grouped bars: one group per metric, one bar per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=120)
    width = 0.8 / max(1, len(systems))
    for i, (name, m) in enumerate(systems.items()):
        xs = [j + i * width for j in range(len(COLUMNS))]
        ax.bar(xs, [m["overall"][c] for c in COLUMNS], width, label=SYSTEM_NAMES.get(name, name))
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(COLUMNS))], [c.capitalize() for c in COLUMNS])
    ax.set_ylim(0, 1)
    ax.set_ylabel("score")
    ax.set_title("Knowledge tagging")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png")
    plt.close(fig)
