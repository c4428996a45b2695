"""Comparisons of the papers the report could not show, each with why and the exact command that
produces it, so an absent table is said, never silently left out (nor an empty input called found).

    rows = missing_comparisons(metrics, params)   # [{"what", "why", "command"}]

RAM2C's Table 2 (the tuned model vs a reference model and that model's RAM2C team) and Table 3
(the team's ablations P/R, E/R, PE/R and R/1 against the full team) are not in the default run:
both judge several more systems of replies, minutes each on the CPU default. Table 2 comes from
``evaluate`` with its comparisons set (the team's own output, ``base_r``, as the reference
system); Table 3 from the queued ablation set (:mod:`pipelines.evaluation.ablation.experiments`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.reporting.tables import Table

ABLATIONS_COMMAND = "python -m pipelines.evaluation.ablation.experiments all"
TABLE_2_COMMAND = "dvc exp run -S 'evaluate.tutoring.comparisons.table_2=[[tuned,base],[tuned,base_r],[base,base_r]]'"
TABLE_3_COMMAND = f"{ABLATIONS_COMMAND} --only ram2c"
WHAT = {
    "2": "RAM2C Table 2: the tuned model vs the reference model (here the base model) and its RAM2C team (base_r)",
    "3": "RAM2C Table 3: the team without P, without E, without P and E, with one expert (P/R, E/R, PE/R, R/1) "
    "vs the full team",
}


def _configured(params: Mapping[str, Any], number: str) -> list[Any]:
    comparisons = (((params.get("evaluate") or {}).get("tutoring") or {}).get("comparisons")) or {}
    return list(comparisons.get(f"table_{number}") or [])


def missing_comparisons(metrics: Mapping[str, Any], params: Mapping[str, Any]) -> list[dict[str, str]]:
    """A row per RAM2C table (2, 3) in neither the evaluate metrics nor the ablation set's tables
    (none before evaluate's HTS tables are there: the inputs table says evaluate is missing)."""
    if "hts" not in metrics:
        return []
    shown = set(((metrics.get("hts") or {}).get("tables") or {}).keys())
    ablations = [str(e) for e in ((metrics.get("ablations") or {}).get("experiments") or [])]
    rows = []
    if "2" not in shown:
        why = ("evaluate.tutoring.comparisons.table_2 is empty in params.yaml (kept out of the default run: "
               "two more systems of replies and three more judged comparisons)") if not _configured(params, "2") \
            else "evaluate has not run with the table_2 comparisons of params.yaml"  # fmt: skip
        rows.append({"what": WHAT["2"], "why": why, "command": TABLE_2_COMMAND})
    if "3" not in shown and not any(name.startswith("ram2c-") for name in ablations):
        why = ("evaluate.tutoring.comparisons.table_3 is empty in params.yaml and reports/ablations.json holds no "
               "ram2c-* experiment (five team variants, kept out of the default run)")  # fmt: skip
        rows.append({"what": WHAT["3"], "why": why, "command": TABLE_3_COMMAND})
    return rows


def missing_table(rows: list[Mapping[str, str]]) -> Table:
    return Table(
        "Missing comparisons: not run, and how to run them",
        ["Comparison", "Why missing", "Command"],
        [[r["what"], r["why"], r["command"]] for r in rows],
        "Run the command in this repository, then the report again (dvc repro report).",
    )
