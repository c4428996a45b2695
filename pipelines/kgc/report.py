"""Scores of every system per dataset (and per round), and the report files.

- ``table.md``: the paper's Table 2 layout (methods x shots as rows, datasets grouped by task as
  columns, F1 in %, CooperKGC's gain over AutoKG; :mod:`pipelines.kgc.table2`), how each
  dataset's gold was matched, EE trigger and argument F1, then F1 per round and the corrections
  (items that appeared / disappeared between rounds).
- ``per_type.md``: per-type P/R/F1 of every system's final answers, per dataset.
- ``rounds.csv`` (DVC plot data: system, dataset, round, f1) and ``rounds.png`` (the rounds figure).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any

from pipelines.io import atomic_open
from pipelines.kgc.schema import Argument, Entity, Event, Triple
from pipelines.kgc.scoring import score
from pipelines.kgc.table2 import gain, matching_note, system_label, table2
from pipelines.reporting.plots import figure_unless_shard, kgc_rounds_plot

CORRECTION_KEYS = ("appeared", "appeared_correct", "appeared_from_peer", "disappeared", "disappeared_correct")


def score_systems(rows: list[dict[str, Any]], report: Any) -> dict[str, Any]:
    """Per system: per dataset the final score, F1 per round and per type; corrections; failures.

    ``rows`` are the predictions.jsonl rows (``dataset``, ``task``, ``gold`` and each system's
    ``predictions`` as JSON); ``report`` the harness counts (failures, unparseable, usage)."""
    out: dict[str, Any] = {}
    for name, system in report.systems.items():
        by_dataset: dict[str, list[tuple[list[Any], Any, str]]] = defaultdict(list)
        tasks: dict[str, tuple[str, str]] = {}
        for row in rows:
            tasks[row["dataset"]] = (row["task"], row.get("matching", "text"))
            gold = items_from_json(row["task"], row["gold"])
            by_dataset[row["dataset"]].append((gold, row["predictions"].get(name), row["text"]))
        datasets, totals = {}, dict.fromkeys(CORRECTION_KEYS, 0)
        for dataset, pairs_of_rows in by_dataset.items():
            task, matching = tasks[dataset]
            n_rounds = max((len(p["rounds"]) for _, p, _ in pairs_of_rows if p), default=1)
            per_round = []
            for t in range(n_rounds):
                pairs = [(gold, items_from_json(task, _round(p, t)), text) for gold, p, text in pairs_of_rows]
                per_round.append(score(task, pairs, matching=matching))
            final = per_round[-1]
            datasets[dataset] = {
                "task": task,
                "sentences": len(pairs_of_rows),
                **final,
                "f1_per_round": [r["overall"]["f1"] for r in per_round],
            }
            for _, p, _ in pairs_of_rows:
                for key in CORRECTION_KEYS:
                    totals[key] += (p or {}).get("corrections", {}).get(key, 0)
        total = system.usage.get("total", {}) if isinstance(system.usage, dict) else {}
        out[name] = {
            "datasets": datasets,
            "corrections": totals,
            "failed_samples": system.failed_samples,
            "failed_subtasks": system.failed_subtasks,
            "unparseable": system.unparseable(),
            "llm_calls": total.get("calls", 0),
            "tokens": total.get("prompt_tokens", 0) + total.get("completion_tokens", 0),
        }
    return out


def items_from_json(task: str, items: list[dict[str, Any]]) -> list[Any]:
    """Entities / triples / events back from their JSON form in predictions.jsonl (to_jsonable's)."""
    if task == "ner":
        return [Entity(**item) for item in items]
    if task == "re":
        return [Triple(**{**item, "qualifiers": tuple(tuple(q) for q in item.get("qualifiers", ()))}) for item in items]
    return [
        Event(**{**item, "arguments": tuple(_argument(a) for a in item.get("arguments", ()))}) for item in items
    ]


def _argument(item: dict[str, Any]) -> Argument:
    return Argument(**{**item, "aliases": tuple(item.get("aliases", ()))})


def _round(prediction: dict | None, t: int) -> list[Any]:
    """Items of round ``t`` (the last one when the prediction has fewer rounds); [] for a failed sample."""
    if not prediction:
        return []
    rounds = prediction["rounds"]
    return rounds[min(t, len(rounds) - 1)]


def table_markdown(metrics: dict[str, Any]) -> str:
    """Table 2 layout (:func:`pipelines.kgc.table2.table2`): rows = systems, columns = datasets
    grouped NER | RE | EE, F1 in %, CooperKGC's gain over AutoKG in parentheses; then EE trigger
    and argument F1, F1 per round and the corrections."""
    section = table2(metrics)
    columns, rows, reference = section["datasets"], section["rows"], section["reference"]
    head = "| Model | " + " | ".join(f"{c['task']}: {c['name']}" for c in columns) + " |"
    lines = [head, "|" + "---|" * (len(columns) + 1)]
    for label, scores in rows.items():
        base = rows.get(reference.get(label, ""), {})
        cells = [gain(scores.get(c["name"]), base.get(c["name"])) for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "In parentheses: CooperKGC's gain over AutoKG at the same shots (the paper's Table 2); "
              "Single expert: the team's round 0, each expert alone.", "",
              f"Gold matched: {matching_note(section['matching'])}; EE cells are argument F1."]
    if section["ee"]:
        ee_columns = [c["name"] for c in columns if c["task"] == "EE"]
        lines += ["", "EE, trigger and argument F1:", ""]
        lines.append("| Model | " + " | ".join(f"{n} trigger | {n} argument" for n in ee_columns) + " |")
        lines.append("|" + "---|" * (2 * len(ee_columns) + 1))
        for label, by_dataset in section["ee"].items():
            cells = [f"{100 * by_dataset[n][k]:.1f}" if n in by_dataset else "-" for n in ee_columns
                     for k in ("trigger", "argument")]  # fmt: skip
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    systems = metrics["systems"]
    lines += ["", "F1 per round (CooperKGC; round 0 = each expert alone):", ""]
    for name, system in systems.items():
        for dataset, d in system["datasets"].items():
            if len(d["f1_per_round"]) > 1:
                lines.append(
                    f"- {system_label(name)}, {dataset}: " + " -> ".join(f"{100 * f:.1f}" for f in d["f1_per_round"])
                )
    lines += ["", "Corrections between rounds (items of the scored expert):", ""]
    lines.append("| Model | appeared | of them gold | seen in a peer's replica | disappeared | of them gold |")
    lines.append("|---|---|---|---|---|---|")
    for name, system in systems.items():
        if name.startswith("cooperkgc"):
            c = system["corrections"]
            lines.append(f"| {system_label(name)} | " + " | ".join(str(c[k]) for k in CORRECTION_KEYS) + " |")
    return "\n".join(lines) + "\n"


def per_type_markdown(metrics: dict[str, Any]) -> str:
    lines = []
    for name, system in metrics["systems"].items():
        for dataset, d in system["datasets"].items():
            lines += [
                f"### {system_label(name)} — {dataset} ({d['task'].upper()})",
                "",
                "| type | P | R | F1 | gold | predicted |",
                "|---|---|---|---|---|---|",
            ]
            for kind, s in d["per_type"].items():
                scores = " | ".join(f"{100 * s[k]:.1f}" for k in ("precision", "recall", "f1"))
                lines.append(f"| {kind} | {scores} | {s['gold']} | {s['pred']} |")
            lines.append("")
    return "\n".join(lines) + "\n"


def rounds_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"system": name, "dataset": dataset, "round": t, "f1": round(f1, 6)}
        for name, system in metrics["systems"].items()
        for dataset, d in system["datasets"].items()
        for t, f1 in enumerate(d["f1_per_round"])
        if len(d["f1_per_round"]) > 1
    ]


def write_reports(reports_dir: Path, metrics: dict[str, Any], data: dict[str, Any], *, plot: bool = True) -> None:
    """table.md, per_type.md, rounds.csv and, with ``plot``, rounds.png under ``reports_dir``
    (atomically). A shard passes ``plot=False`` (and a ``rounds.png`` already there is removed):
    the merge draws the run's figure from the merged rows, and a shard process so never imports
    matplotlib (about 1 s of CPU with the drawing)."""
    sources = ", ".join(
        f"{n} ({'demo set' if d['fallback'] else 'files'}: {d['evaluated']} sentences)"
        for n, d in data["datasets"].items()
    )
    left = ", ".join(d["name"] for d in data["left_out"]) or "none"
    note = (
        f"\n{metrics['n_evaluated']} sentences scored ({sources}); optional datasets left out: {left}. "
        f"Strict micro-F1 in %, {metrics['output_mode']} mode, {metrics['rounds']} rounds.\n"
    )
    with atomic_open(reports_dir / "table.md") as handle:
        handle.write("# Knowledge-graph construction (Table 2 layout)\n\n" + table_markdown(metrics) + note)
    with atomic_open(reports_dir / "per_type.md") as handle:
        handle.write("# Per-type scores (final answers)\n\n" + per_type_markdown(metrics))
    rows = rounds_rows(metrics)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["system", "dataset", "round", "f1"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    with atomic_open(reports_dir / "rounds.csv") as handle:
        handle.write(buffer.getvalue())
    figure_unless_shard(reports_dir / "rounds.png", lambda path: write_rounds_plot(path, rows), shard=not plot)


def write_rounds_plot(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rounds.png``: the report's F1-per-round figure of these rows (F1 on 0-100, integer rounds,
    the legend outside, all-zero series said so)."""
    series: dict[str, list[float]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r["round"]):
        series[f"{system_label(row['system'])} · {row['dataset']}"].append(row["f1"])
    kgc_rounds_plot(path, {"rounds": dict(series)}, title="CooperKGC: F1 per collaboration round")
