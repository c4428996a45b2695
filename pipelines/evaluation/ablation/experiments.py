"""The papers' ablations as one queued ``dvc exp`` set, and their tables.

    python -m pipelines.evaluation.ablation.experiments all            # queue, run them all, write reports/ablations.md
    python -m pipelines.evaluation.ablation.experiments queue [--only ram2c,kgc] [--dry-run]
    python -m pipelines.evaluation.ablation.experiments run  [-j 1]    # dvc exp run --run-all
    python -m pipelines.evaluation.ablation.experiments tables [--show-json exps.json] [-o reports/ablations.md]

Every experiment is ``dvc exp run --queue -n <name> -S <override> ...`` on the whole pipeline, so
a variant's data also trains and is measured downstream (stages whose inputs did not change are
restored, not rerun). The set (:data:`ABLATIONS`): RAM2C's Table 3, one row each (the base model's
replies rewritten by the full team, by the team without P, without E, without P and E, with one
expert per group, judged against the full team's on the same held-out prompts: only the evaluate
stage reruns, nothing is retrained); CooperKGC after 0-4 rounds, without simplification, without
background (its ablations); the tagging team vs the single LLM as the only system. The tables
read ``dvc exp show --json`` (:mod:`pipelines.evaluation.ablation.tables`): one per paper, the baseline
commit and its experiments, the switched params and the metrics with their change.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipelines.evaluation.ablation.tables import ablation_table, experiments
from pipelines.evaluation.report.render import table_markdown
from pipelines.io import atomic_open


@dataclass(frozen=True)
class Ablation:
    name: str  # the experiment's name (dvc exp run -n); starts with its team
    team: str  # tagging | kgc | ram2c: the table it belongs to
    overrides: tuple[str, ...]  # dvc exp run -S values (Hydra override syntax)
    what: str
    section: str = ""  # the params section the overrides change (default: the team's)

    @property
    def params_section(self) -> str:
        return self.section or self.team


def ram2c_row(name: str, system: str, what: str) -> Ablation:
    """One row of RAM2C's Table 3: ``system`` (a team variant in ``evaluate.tutoring.systems``, or
    ``base`` for GLM vs GLM-R) against the full team ``base_r``, tutoring only, no Table 1."""
    overrides = (
        "evaluate.systems=[tutoring]",
        "evaluate.tutoring.comparisons.table_1=[]",
        f"evaluate.tutoring.comparisons.table_3=[[{system},base_r]]",
    )
    return Ablation(name, "ram2c", overrides, what, section="evaluate")


ABLATIONS: tuple[Ablation, ...] = (
    ram2c_row("ram2c-no-team", "base", "the base model's replies vs the full RAM2C team's (GLM vs GLM-R)"),
    ram2c_row("ram2c-no-p", "base_p_r", "the team without the psychologist group vs the full team"),
    ram2c_row("ram2c-no-e", "base_e_r", "the team without the ethics group vs the full team"),
    ram2c_row("ram2c-no-p-e", "base_pe_r", "the teacher group only vs the full team"),
    ram2c_row("ram2c-one-expert", "base_r1", "one expert per group vs the full team"),
    *(
        Ablation(f"kgc-rounds-{n}", "kgc", (f"kgc.team.rounds={n}",), f"CooperKGC with {n} rounds after round 0")
        for n in range(5)
    ),
    Ablation("kgc-no-simplification", "kgc", ("kgc.team.simplification=false",), "replicas are the raw replies"),
    Ablation("kgc-no-background", "kgc", ("kgc.team.background=false",), "no expert background statement"),
    Ablation("tagging-team-only", "tagging", ("tagging.systems=[team]",), "the multi-agent team alone"),
    Ablation("tagging-single-llm", "tagging", ("tagging.systems=[single_llm]",), "the single LLM alone"),
)

EVALUATE = "reports/evaluate/metrics.json"
HTS = EVALUATE + ":tutoring.hts.tables.3.rows.*.{}.score"  # the experiment's Table 3 row (variant vs full team)


def queue_commands(ablations: Sequence[Ablation] = ABLATIONS) -> list[list[str]]:
    """One ``dvc exp run --queue -n <name> -S ...`` argv per ablation."""
    return [["dvc", "exp", "run", "--queue", "-n", a.name, *[x for o in a.overrides for x in ("-S", o)]]
            for a in ablations]  # fmt: skip


def table_specs(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per team: title, the params switched, the metrics shown (``(label, file:key)``); the KGC
    columns are the datasets scored in ``params`` (CooperKGC at the first ``shots`` entry)."""
    kgc = params.get("kgc") or {}
    shots = (kgc.get("shots") or [0])[0]
    datasets = [d["name"] for d in kgc.get("datasets", []) if d.get("evaluate", True)]
    kgc_file = "reports/generate_kgc/metrics.json:"
    kgc_metrics = [(f"F1 {d}", f"{kgc_file}systems.cooperkgc@{shots}shot.datasets.{d}.overall.f1") for d in datasets]
    tagging = "reports/generate_tagging/metrics.json:"
    return [
        {"team": "ram2c", "title": "RAM2C ablations (Table 3 layout: each team variant vs the full team, same prompts)",
         "params": ["evaluate.tutoring.comparisons.table_3"],
         "metrics": [("H", HTS.format("humanized")), ("T", HTS.format("teaching")), ("S", HTS.format("safety")),
                     ("Items", EVALUATE + ":tutoring.n")]},
        {"team": "kgc", "title": "CooperKGC ablations (rounds, simplification, background)",
         "params": ["kgc.team.rounds", "kgc.team.simplification", "kgc.team.background"],
         "metrics": [*kgc_metrics, ("SFT rows", kgc_file + "sft_rows")]},
        {"team": "tagging", "title": "Knowledge tagging: team vs single LLM",
         "params": ["tagging.systems"],
         "metrics": [("Team F1", tagging + "systems.team.overall.f1"),
                     ("Single LLM F1", tagging + "systems.single_llm.overall.f1"),
                     ("SFT rows", tagging + "sft_rows"), ("Tuned F1", EVALUATE + ":tagging.tuned.f1")]},
    ]  # fmt: skip


def ablation_tables(show: Sequence[Mapping[str, Any]], params: Mapping[str, Any], *, offline: bool = False) -> str:
    """``reports/ablations.md``: one table per team, the baseline commit(s) and that team's experiments."""
    exps = experiments(show)
    names = {a.name: a.team for a in ABLATIONS}
    parts = ["# Ablations (dvc experiments)", ""]
    for spec in table_specs(params):
        chosen = [e for e in exps if e["baseline"] or names.get(e["name"]) == spec["team"]]
        provenance = {"data": "each experiment's own pipeline run (dvc exp show --json)",
                      "experiments": ", ".join(a.name for a in ABLATIONS if a.team == spec["team"])}  # fmt: skip
        table = ablation_table(chosen, params=spec["params"], metrics=spec["metrics"], title=spec["title"],
                               provenance=provenance, offline=offline)  # fmt: skip
        parts.append(table_markdown(table))
    return "\n".join(parts)


def _call(argv: list[str], *, dry_run: bool) -> int:
    print("$ " + " ".join(argv), flush=True)
    return 0 if dry_run else subprocess.run(argv, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.evaluation.ablation.experiments", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("action", choices=["queue", "run", "tables", "all", "list"])
    parser.add_argument("--only", help="comma-separated teams to queue (tagging,kgc,ram2c); default all")
    parser.add_argument("--dry-run", action="store_true", help="print the dvc commands instead of running them")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="experiments run in parallel (dvc exp run -j)")
    parser.add_argument("--params", default="params.yaml", help="params file naming the KGC datasets for the table")
    parser.add_argument("--show-json", help="a saved `dvc exp show --json` (default: run it)")
    parser.add_argument("--offline-default", action="store_true", help="label the numbers as the offline default")
    parser.add_argument("-o", "--output", default="reports/ablations.md")
    args = parser.parse_args(argv)
    teams = set(args.only.split(",")) if args.only else {a.team for a in ABLATIONS}
    chosen = [a for a in ABLATIONS if a.team in teams]
    if args.action == "list":
        for a, cmd in zip(chosen, queue_commands(chosen), strict=True):
            print(f"{a.name}: {a.what}\n  {' '.join(cmd)}")
        return 0
    if args.action in ("queue", "all"):
        for cmd in queue_commands(chosen):
            if code := _call(cmd, dry_run=args.dry_run):
                return code
    run_all = ["dvc", "exp", "run", "--run-all", "-j", str(args.jobs)]
    if args.action in ("run", "all") and (code := _call(run_all, dry_run=args.dry_run)):
        return code
    if args.action in ("tables", "all") and not args.dry_run:
        if args.show_json:
            text = Path(args.show_json).read_text(encoding="utf-8")
        else:
            text = subprocess.run(["dvc", "exp", "show", "--json"], check=True, capture_output=True, text=True).stdout
        params = yaml.safe_load(Path(args.params).read_text(encoding="utf-8")) or {}
        with atomic_open(args.output) as handle:
            handle.write(ablation_tables(json.loads(text), params, offline=args.offline_default))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
