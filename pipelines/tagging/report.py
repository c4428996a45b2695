"""The human-facing outputs: a Markdown table laid out like the paper's Table 4 (models as rows
grouped by method: embedding similarity, PLM fine-tuning, single LLM, multi-agent team; the
backbone named per row; accuracy, precision, recall, F1 and coverage as columns, then the cost
columns) and a PNG bar chart of the same numbers."""

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
METHOD_ORDER = ("embedding", "plm", "single_llm", "team")
COLUMNS = ("accuracy", "precision", "recall", "f1")
TEAM_ROLES = ("planner", "solver", "semantic_judge", "numerical_judge")


def _short(model: str) -> str:
    return Path(str(model)).name or str(model)


def backbones(cfg: Any, runtime: Any) -> dict[str, str]:
    """The backbone named in each system's row: the encoder folder, the single LLM's model, and the
    team's model (with the roles on another model named, e.g. ``smollm2; numerical judge: gpt-4o``)."""
    out = {"embedding": _short(cfg.embedding.model), "plm": _short(cfg.plm.model)}
    if "single_llm" in cfg.systems:
        out["single_llm"] = _short(runtime.spec_for("single_llm").model)
    if "team" in cfg.systems:
        models = {role: _short(runtime.spec_for(role).model) for role in TEAM_ROLES}
        main = max(set(models.values()), key=lambda m: (list(models.values()).count(m), m))
        others = [f"{role.replace('_', ' ')}: {m}" for role, m in models.items() if m != main]
        out["team"] = "; ".join([main, *others])
    return out


def _backbone_cell(name: str, m: dict[str, Any]) -> str:
    cell = m.get("backbone", "")
    if name == "plm" and m.get("learning_rate") is not None:
        cell += f" (lr {m['learning_rate']:g})"
    return cell


def markdown_table(systems: dict[str, dict[str, Any]]) -> str:
    """``| Method | Backbone | Accuracy | Precision | Recall | F1 | Coverage | LLM calls/q | tokens/q |
    failed sub-tasks |``, one row per system, grouped in the paper's method order (the method named
    on the first row of its group)."""
    lines = [
        "| Method | Backbone | Accuracy | Precision | Recall | F1 | Coverage | LLM calls / question "
        "| tokens / question | failed sub-tasks |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    order = sorted(systems, key=lambda n: METHOD_ORDER.index(n) if n in METHOD_ORDER else len(METHOD_ORDER))
    previous = None
    for name in order:
        m = systems[name]
        method = SYSTEM_NAMES.get(name, name)
        cells = [f"{100 * m['overall'][c]:.1f}" for c in COLUMNS]
        cells.append(f"{100 * m['overall'].get('coverage', 1.0):.1f}")
        cells += [
            f"{m.get('llm_calls_per_question', 0):.2f}",
            f"{m.get('tokens_per_question', 0):.0f}",
            str(m.get("failed_subtasks", 0)),
        ]
        shown = f"**{method}**" if method != previous else ""
        previous = method
        lines.append(f"| {shown} | {_backbone_cell(name, m)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table(path: Path | str, systems: dict[str, dict[str, Any]], *, title: str, note: str = "") -> None:
    with atomic_open(path) as handle:
        handle.write(f"# {title}\n\n{markdown_table(systems)}\n")
        if note:
            handle.write(note.rstrip() + "\n")


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
        label = f"{SYSTEM_NAMES.get(name, name)} ({m.get('backbone', '')})".replace(" ()", "")
        ax.bar(xs, [m["overall"].get(c, 1.0) for c in columns], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(columns))], [c.capitalize() for c in columns])
    ax.set_ylim(0, 1)
    ax.set_ylabel("score")
    ax.set_title("Knowledge tagging")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png")
    plt.close(fig)
