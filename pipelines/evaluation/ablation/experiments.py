"""The papers' ablations as one queued ``dvc exp`` set, and their tables.

    python -m pipelines.evaluation.ablation.experiments list [--only ram2c]   # the set, its commands, a time estimate
    python -m pipelines.evaluation.ablation.experiments all            # queue, run them all, tables, the summary again
    python -m pipelines.evaluation.ablation.experiments queue [--only ram2c,kgc-rounds-0] [--dry-run]
    python -m pipelines.evaluation.ablation.experiments run  [-j 1]    # link ../shared, dvc exp run --run-all
    python -m pipelines.evaluation.ablation.experiments tables [--show-json exps.json]   # reports/ablations.{json,md}

Every experiment is ``dvc exp run --queue -n <name> -S <override> ...`` on the whole pipeline, so
a variant's data also trains and is measured downstream (stages whose inputs did not change are
restored, not rerun). The set (:data:`ABLATIONS`): RAM2C's Table 3, one row each (the base model's
replies rewritten by the full team, by the team without P, without E, without P and E, with one
expert per group, judged against the full team's on the same held-out prompts: only the evaluate
stage reruns, nothing is retrained); CooperKGC after 0-4 rounds, without simplification, without
background (its ablations), and the runs behind its Table 2, Table 3 and Fig. 3
(:mod:`pipelines.evaluation.ablation.kgc`); the tagging team vs the single LLM as the only system. The tables
read ``dvc exp show --json`` (:mod:`pipelines.evaluation.ablation.tables`): one per paper, the baseline
commit and its experiments, the switched params and the metrics with their change; the report
stage puts them into ``summary.md`` / ``summary.html`` (``reports/ablations.json`` is its input).

Queued experiments run in a temporary copy of the repository: each is queued with ``-C`` for the
request cache and the knowledge bases, and ``../shared`` is linked for them
(:mod:`pipelines.workspace`); a queued run that lacks any of them stops with
an error saying so. Before queueing, :mod:`pipelines.evaluation.ablation.estimate` prints how long
the set will take from the workspace's last stage times.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipelines import workspace
from pipelines.config import read_yaml
from pipelines.evaluation.ablation import estimate
from pipelines.evaluation.ablation.kgc import PAPER_EXPERIMENTS as KGC_PAPER_EXPERIMENTS
from pipelines.evaluation.ablation.kgc import kgc_paper_tables
from pipelines.evaluation.ablation.tables import ablation_table, experiments
from pipelines.io import atomic_open, write_json_atomic
from pipelines.reporting.render import table_markdown
from pipelines.reporting.tables import Table


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
    *(Ablation(name, "kgc", overrides, what) for name, overrides, what in KGC_PAPER_EXPERIMENTS),
    Ablation("tagging-team-only", "tagging", ("tagging.systems=[team]",), "the multi-agent team alone"),
    Ablation("tagging-single-llm", "tagging", ("tagging.systems=[single_llm]",), "the single LLM alone"),
)

KGC_PAPER_NAMES = {name for name, _, _ in KGC_PAPER_EXPERIMENTS}
ABLATIONS_JSON = "reports/ablations.json"  # the set's tables, read by the report stage
EVALUATE = "reports/evaluate/metrics.json"
HTS = EVALUATE + ":tutoring.hts.tables.3.rows.*.{}.score"  # the experiment's Table 3 row (variant vs full team)


def queue_commands(ablations: Sequence[Ablation] = ABLATIONS, *, copy: Sequence[str] = ()) -> list[list[str]]:
    """One ``dvc exp run --queue -n <name> -S ... -C <path> ...`` argv per ablation (``copy``: the
    ignored paths each queued copy needs, :func:`workspace.copy_paths`)."""
    copied = [x for path in copy for x in ("-C", path)]
    return [["dvc", "exp", "run", "--queue", "-n", a.name, *[x for o in a.overrides for x in ("-S", o)], *copied]
            for a in ablations]  # fmt: skip


def choose(only: str | None) -> list[Ablation]:
    """The ablations named by ``--only``: team names and/or experiment names, comma-separated."""
    if not only:
        return list(ABLATIONS)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    known = {a.team for a in ABLATIONS} | {a.name for a in ABLATIONS}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise SystemExit(f"error: --only {', '.join(unknown)}: not a team or an experiment of the set "
                         f"({', '.join(sorted(known))})")  # fmt: skip
    return [a for a in ABLATIONS if a.team in wanted or a.name in wanted]


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
         "only": [a.name for a in ABLATIONS if a.team == "kgc" and a.name not in KGC_PAPER_NAMES],
         "params": ["kgc.team.rounds", "kgc.team.simplification", "kgc.team.background"],
         "metrics": [*kgc_metrics, ("SFT rows", kgc_file + "sft_rows")]},
        {"team": "tagging", "title": "Knowledge tagging: team vs single LLM",
         "params": ["tagging.systems"],
         "metrics": [("Team F1", tagging + "systems.team.overall.f1"),
                     ("Single LLM F1", tagging + "systems.single_llm.overall.f1"),
                     ("SFT rows", tagging + "sft_rows"), ("Tuned F1", EVALUATE + ":tagging.tuned.f1")]},
    ]  # fmt: skip


def set_tables(show: Sequence[Mapping[str, Any]], params: Mapping[str, Any], *, offline: bool = False) -> list[Table]:
    """One table per team that has experiments in ``show`` (``dvc exp show --json``): the baseline
    commit(s) and that team's experiments of the set."""
    exps = experiments(show)
    names = {a.name: a.team for a in ABLATIONS}
    tables = []
    for spec in table_specs(params):
        shown = spec.get("only") or [a.name for a in ABLATIONS if a.team == spec["team"]]
        ran = [e for e in exps if names.get(e["name"]) == spec["team"] and e["name"] in shown]
        if not ran:
            continue
        chosen = [e for e in exps if e["baseline"]] + ran
        provenance = {"data": "each experiment's own whole-pipeline run (dvc exp show --json)",
                      "experiments": ", ".join(e["name"] for e in ran)}  # fmt: skip
        tables.append(ablation_table(chosen, params=spec["params"], metrics=spec["metrics"], title=spec["title"],
                                     provenance=provenance, offline=offline))  # fmt: skip
    if any(e["name"] in KGC_PAPER_NAMES for e in exps):  # the paper's layouts once one of their runs is there
        tables += kgc_paper_tables(exps, params, offline=offline)
    return tables


def ablation_tables(show: Sequence[Mapping[str, Any]], params: Mapping[str, Any], *, offline: bool = False) -> str:
    """``reports/ablations.md``: :func:`set_tables` as Markdown."""
    tables = set_tables(show, params, offline=offline)
    body = [table_markdown(t) for t in tables] or ["No experiment of the ablation set is in `dvc exp show`.\n"]
    return "\n".join(["# Ablations (dvc experiments)", "", *body])


def write_tables(show: Sequence[Mapping[str, Any]], params: Mapping[str, Any], *, output: Path | str,
                 offline: bool = False) -> Path:  # fmt: skip
    """``reports/ablations.json`` (the tables the summary shows) and the Markdown beside it."""
    output = Path(output)
    tables = set_tables(show, params, offline=offline)
    names = {a.name for a in ABLATIONS}
    ran = [e["name"] for e in experiments(show) if e["name"] in names]
    write_json_atomic(output, {"experiments": ran, "tables": [asdict(t) for t in tables]})
    with atomic_open(output.with_suffix(".md")) as handle:
        handle.write(ablation_tables(show, params, offline=offline))
    return output


def _call(argv: list[str], *, dry_run: bool) -> int:
    print("$ " + " ".join(argv), flush=True)
    return 0 if dry_run else subprocess.run(argv, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.evaluation.ablation.experiments", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("action", choices=["queue", "run", "tables", "all", "list", "link"])
    parser.add_argument("--only", help="comma-separated teams (tagging,kgc,ram2c) or experiment names; default all")
    parser.add_argument("--dry-run", action="store_true", help="print the dvc commands instead of running them")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="experiments run in parallel (dvc exp run -j)")
    parser.add_argument("--params", default="params.yaml", help="params file naming the KGC datasets for the table")
    parser.add_argument("--show-json", help="a saved `dvc exp show --json` (default: run it)")
    parser.add_argument("--offline-default", action="store_true", help="label the numbers as the offline default")
    parser.add_argument("-o", "--output", default=ABLATIONS_JSON, help="tables for the summary (+ the .md beside it)")
    args = parser.parse_args(argv)
    chosen = choose(args.only)
    commands = queue_commands(chosen, copy=workspace.copy_paths())
    if args.action in ("list", "queue", "all"):
        print(estimate.describe(estimate.estimate(chosen, jobs=args.jobs)), flush=True)
    if args.action == "list":
        for a, cmd in zip(chosen, commands, strict=True):
            print(f"{a.name}: {a.what}\n  {' '.join(cmd)}")
        return 0
    if args.action in ("link", "run", "all") and not args.dry_run:
        for link in workspace.link_shared():
            print(f"linked {link} -> {link.resolve()} (../shared of the queued copies)", flush=True)
    if args.action in ("queue", "all"):
        for cmd in commands:
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
        params = read_yaml(Path(args.params))  # YAML 1.2, as the stages read it
        written = write_tables(json.loads(text), params, output=args.output, offline=args.offline_default)
        print(f"wrote {written} and {written.with_suffix('.md')}", file=sys.stderr)
    if args.action == "all":  # the summary with the tables (reports/ablations.json is a dep of the report stage)
        return _call(["dvc", "repro", "report"], dry_run=args.dry_run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
