"""The paper's Table 2 from the stage's metrics: rows, the reference of each gain, what was matched.

Table 2 of CooperKGC: rows are methods x shots (AutoKG, ChatIE, CoT-ER at 0-shot, the same at
1-shot, then CooperKGC at 0 and 1 shot), columns the datasets grouped NER | RE | EE, F1 in %, and
CooperKGC's cells show its gain over AutoKG at the same shots in parentheses. Here the team's round
0 (each expert alone) is a row of its own, "Single expert (k-shot)", so the table also shows what
the collaboration rounds added; self-consistency (the bottom rows of the paper's Table 3) follows
the baselines.

    section = table2(metrics)   # {"datasets", "rows", "reference", "matching", "ee"}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.kgc.matching import DESCRIBED

LABELS = {
    "cooperkgc": "CooperKGC",
    "autokg": "AutoKG",
    "chatie": "ChatIE",
    "coter": "CoT-ER",
    "self_consistency": "Self-consistency",
}
TASK_ORDER = ("ner", "re", "ee")
BASELINES = ("autokg", "chatie", "coter", "self_consistency")
REFERENCE = "autokg"  # the paper's gains are over AutoKG (the vanilla LLM) at the same shots


def split_system(system: str) -> tuple[str, int | None]:
    """``"cooperkgc@1shot"`` -> ``("cooperkgc", 1)``; a name without shots -> ``(name, None)``."""
    method, _, shots = system.partition("@")
    count = shots.removesuffix("shot")
    return method, int(count) if count.isdigit() else None


def system_label(system: str) -> str:
    """``CooperKGC (0-shot)`` for ``cooperkgc@0shot``."""
    method, shots = split_system(system)
    name = LABELS.get(method, method)
    return name if shots is None else f"{name} ({shots}-shot)"


def single_label(system: str) -> str:
    _, shots = split_system(system)
    return "Single expert" if shots is None else f"Single expert ({shots}-shot)"


def dataset_columns(systems: Mapping[str, Any]) -> list[dict[str, str]]:
    """``[{"name", "task"}]`` of every scored dataset, grouped NER | RE | EE (task in capitals)."""
    tasks: dict[str, str] = {}
    for system in systems.values():
        for name, d in system["datasets"].items():
            tasks.setdefault(name, d.get("task", ""))
    order = {t: i for i, t in enumerate(TASK_ORDER)}
    names = sorted(tasks, key=lambda n: order.get(tasks[n], len(order)))
    return [{"name": n, "task": tasks[n].upper()} for n in names]


def _order(system: str) -> tuple:
    method, shots = split_system(system)
    if method in BASELINES:
        return (0, shots or 0, BASELINES.index(method))
    return (1 if method == "cooperkgc" else 2, shots or 0, method)


def table2(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``datasets``: the columns; ``rows``: ``{label: {dataset: f1}}`` in the paper's order;
    ``reference``: ``{CooperKGC label: AutoKG label}`` at the same shots (when AutoKG ran);
    ``matching``: ``{dataset: how gold was matched}``; ``ee``: ``{label: {dataset: {"trigger",
    "argument"}}}`` for the EE datasets."""
    systems = metrics["systems"]
    rows: dict[str, dict[str, float]] = {}
    reference: dict[str, str] = {}
    matching: dict[str, str] = {}
    ee: dict[str, dict[str, dict[str, float]]] = {}
    ordered = sorted(systems, key=_order)
    for system in ordered:
        result = systems[system]
        method, shots = split_system(system)
        label = system_label(system)
        datasets = result["datasets"]
        per_round = {n: d.get("f1_per_round") or [] for n, d in datasets.items()}
        if method == "cooperkgc" and any(len(v) > 1 for v in per_round.values()):
            rows[single_label(system)] = {n: v[0] for n, v in per_round.items() if v}
        rows[label] = {n: (d.get("overall") or {}).get("f1") for n, d in datasets.items()}
        autokg = f"{REFERENCE}@{shots}shot" if shots is not None else REFERENCE
        if method == "cooperkgc" and autokg in systems:
            reference[label] = system_label(autokg)
        for name, d in datasets.items():
            matching.setdefault(name, d.get("matching", "text"))
            if "trigger" in d and "argument" in d:
                ee.setdefault(label, {})[name] = {"trigger": d["trigger"]["f1"], "argument": d["argument"]["f1"]}
    single_rows = [label for label in rows if label.startswith("Single expert")]
    team_rows = [label for label in rows if label not in single_rows and label.startswith("CooperKGC")]
    head = [label for label in rows if label not in single_rows and label not in team_rows]
    rows = {label: rows[label] for label in [*head, *single_rows, *team_rows]}
    columns = dataset_columns(systems)
    matching = {c["name"]: matching[c["name"]] for c in columns}  # in the columns' order
    return {"datasets": columns, "rows": rows, "reference": reference, "matching": matching, "ee": ee}


def matching_note(matching: Mapping[str, str]) -> str:
    """``conllpp by character offsets, nyt11_hrl by text, ...``: how each dataset's gold was matched."""
    return ", ".join(f"{name} by {DESCRIBED.get(how, how)}" for name, how in matching.items())


def gain(value: float | None, reference: float | None) -> str:
    """``61.3 (+10.7)``: F1 in % with the gain over the reference in points (``-`` when missing)."""
    if value is None:
        return "-"
    cell = f"{100 * value:.1f}"
    return cell if reference is None else f"{cell} ({100 * (value - reference):+.1f})"
