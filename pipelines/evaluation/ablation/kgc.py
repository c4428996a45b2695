"""CooperKGC's paper layouts from the queued experiments (``dvc exp show --json``): Table 2, Table 3
and Fig. 3, each from the experiments of :data:`PAPER_EXPERIMENTS` and the baseline commit.

- Table 2 (methods x shots by datasets, CooperKGC's gain over AutoKG): the ``kgc-table2``
  experiment (every baseline at 0 and 1 shot), else the baseline commit's own systems.
- Table 3 (team members, 0-shot, the English datasets): the default 3-agent team (the baseline),
  the team with an OntoNotes NER expert added, with a Re-TACRED RE expert added, with both; then
  the paper's bottom rows, self-consistency with 3 same-task agents ("3-Agent (all <dataset>)":
  3 samples of the dataset's own expert, majority vote), each in its own dataset's column.
- Fig. 3 (knowledge backgrounds): the default combination and combinations a, b, c of §5.3, which
  replace the experts' backgrounds (b = OntoNotes5.0 + RE-TACRED + ACE05 as the paper names it;
  a and c are read from its text: a differs from b in the RE background, c in the NER one), as a
  table of F1 per dataset (the figure's bars).

The scored expert always takes its own dataset's schema, so a background changes the other experts.
A row whose experiment has not run shows ``-`` and the note says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.kgc.datasets import FORMAT_LANGUAGE
from pipelines.kgc.table2 import table2
from pipelines.reporting.tables import Table, kgc_table, percent, provenance_line

KGC_METRICS = "reports/generate_kgc/metrics.json"
DEFAULT_TEAM = (("ner", "conllpp", "NER expert agent"), ("re", "nyt11_hrl", "RE expert agent"),
                ("ee", "ace05", "EE expert agent"))  # fmt: skip
ONTONOTES = ("ner", "ontonotes5", "OntoNotes NER expert agent")
RETACRED = ("re", "retacred", "Re-TACRED RE expert agent")


def members_override(*members: tuple[str, str, str]) -> str:
    """``kgc.team.members.en=[{task: ner, schema_name: conllpp, name: NER expert agent}, ...]``."""
    items = ", ".join(f"{{task: {t}, schema_name: {s}, name: {n}}}" for t, s, n in members)
    return f"kgc.team.members.en=[{items}]"


def _backgrounds(ner: str, re_: str, ee: str) -> str:
    return members_override(("ner", ner, "NER expert agent"), ("re", re_, "RE expert agent"),
                            ("ee", ee, "EE expert agent"))  # fmt: skip


TABLE2 = "kgc-table2"
SELF_CONSISTENCY = "kgc-self-consistency-3"
TABLE3 = {"kgc-team-plus-ontonotes": "3-Agent + OntoNotes", "kgc-team-plus-retacred": "3-Agent + Re-TACRED",
          "kgc-team-plus-both": "3-Agent + both"}  # fmt: skip
FIG3 = {"kgc-backgrounds-a": "a: OntoNotes5.0 + NYT11-HRL + ACE05", "kgc-backgrounds-b": "b: OntoNotes5.0 + "
        "Re-TACRED + ACE05", "kgc-backgrounds-c": "c: CoNLL++ + Re-TACRED + ACE05"}  # fmt: skip

PAPER_EXPERIMENTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (TABLE2, ("kgc.systems=[cooperkgc,autokg,chatie,coter]", "kgc.shots=[0,1]"),
     "Table 2: CooperKGC and every baseline at 0 and 1 shot"),
    ("kgc-team-plus-ontonotes", (members_override(*DEFAULT_TEAM, ONTONOTES),),
     "Table 3: the team with an OntoNotes NER expert added"),
    ("kgc-team-plus-retacred", (members_override(*DEFAULT_TEAM, RETACRED),),
     "Table 3: the team with a Re-TACRED RE expert added"),
    ("kgc-team-plus-both", (members_override(*DEFAULT_TEAM, ONTONOTES, RETACRED),),
     "Table 3: the team with both added"),
    (SELF_CONSISTENCY, ("kgc.systems=[self_consistency]", "kgc.self_consistency.k=3"),
     "Table 3, bottom rows: self-consistency with 3 same-task agents"),
    ("kgc-backgrounds-a", (_backgrounds("ontonotes5", "nyt11_hrl", "ace05"),), "Fig. 3 combination a"),
    ("kgc-backgrounds-b", (_backgrounds("ontonotes5", "retacred", "ace05"),), "Fig. 3 combination b"),
    ("kgc-backgrounds-c", (_backgrounds("conllpp", "retacred", "ace05"),), "Fig. 3 combination c"),
)  # fmt: skip
"""``(name, dvc exp run -S overrides, what)`` of the experiments behind these layouts."""


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}`` (the inverse of the ablation tables' ``flatten``)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def _kgc(exp: Mapping[str, Any] | None) -> dict[str, Any]:
    return unflatten((exp or {}).get("metrics", {}).get(KGC_METRICS) or {})


def _latest(exps: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    found = [e for e in exps if e["name"] == name and _kgc(e).get("systems")]
    return found[-1] if found else None


def _baseline(exps: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    found = [e for e in exps if e["baseline"] and _kgc(e).get("systems")]
    return found[-1] if found else None


def _f1(exp: Mapping[str, Any] | None, system: str, dataset: str) -> float | None:
    result = ((_kgc(exp).get("systems") or {}).get(system) or {}).get("datasets", {}).get(dataset) or {}
    return (result.get("overall") or {}).get("f1")


def english_datasets(params: Mapping[str, Any]) -> list[str]:
    """The evaluated English datasets of ``params`` (the columns of Table 3 and Fig. 3)."""
    return [d["name"] for d in (params.get("kgc") or {}).get("datasets", [])
            if d.get("evaluate", True) and FORMAT_LANGUAGE.get(d.get("format")) == "en"]  # fmt: skip


def _note(ran: list[str], missing: list[str], offline: bool, extra: str = "") -> str:
    provenance = {"data": "each experiment's own pipeline run (dvc exp show --json)",
                  "experiments": ", ".join(ran) or "none", "not run": ", ".join(missing) or "none",
                  "scores": "CooperKGC 0-shot, strict micro-F1 in % (EE: argument F1)" + extra}  # fmt: skip
    return provenance_line(provenance, offline=offline)


def table2_table(exps: Sequence[Mapping[str, Any]], *, offline: bool = False) -> Table | None:
    """Table 2 from ``kgc-table2`` (else the baseline commit); None without any KGC metrics."""
    exp = _latest(exps, TABLE2) or _baseline(exps)
    if exp is None:
        return None
    section = table2(_kgc(exp))
    scores = "strict micro-F1 in %; EE: argument F1; CooperKGC's gain over AutoKG"
    section["provenance"] = {"data": f"experiment {exp['name']} (dvc exp show --json)", "scores": scores}
    table = kgc_table(section, offline=offline)
    table.title = "CooperKGC Table 2 layout: F1 of every method at 0 and 1 shot"
    return table


def _team_rows(
    exps: Sequence[Mapping[str, Any]], columns: list[str], baseline_label: str, named: Mapping[str, str]
) -> tuple[list[list[str]], list[str], list[str]]:
    """The baseline's CooperKGC row, then one row per experiment of ``named`` (name -> label);
    with the experiments that ran and those that did not."""
    base = _baseline(exps)
    rows = [[baseline_label, *[percent(_f1(base, "cooperkgc@0shot", d)) for d in columns]]]
    ran, missing = ([base["name"]] if base else []), ([] if base else ["baseline"])
    for name, label in named.items():
        exp = _latest(exps, name)
        (ran if exp else missing).append(name)
        rows.append([label, *[percent(_f1(exp, "cooperkgc@0shot", d)) for d in columns]])
    return rows, ran, missing


def table3_table(exps: Sequence[Mapping[str, Any]], params: Mapping[str, Any], *, offline: bool = False) -> Table:
    """Table 3: team members (rows) by the English datasets (columns)."""
    columns = english_datasets(params)
    rows, ran, missing = _team_rows(exps, columns, "3-Agent", TABLE3)
    consistency = _latest(exps, SELF_CONSISTENCY)
    (ran if consistency else missing).append(SELF_CONSISTENCY)
    for dataset in columns:
        cells = [percent(_f1(consistency, "self_consistency@0shot", d)) if d == dataset else "-" for d in columns]
        rows.append([f"3-Agent (all {dataset})", *cells])
    return Table("CooperKGC Table 3 layout: performance under different member assignments",
                 ["Team Members", *columns], rows,
                 _note(ran, missing, offline, "; 3-Agent (all <dataset>): self-consistency, 3 samples of the "
                       "dataset's own expert at temperature > 0, majority vote"))  # fmt: skip


def figure3_table(exps: Sequence[Mapping[str, Any]], params: Mapping[str, Any], *, offline: bool = False) -> Table:
    """Fig. 3: F1 per English dataset for each combination of knowledge backgrounds."""
    columns = english_datasets(params)
    rows, ran, missing = _team_rows(exps, columns, "default: CoNLL++ + NYT11-HRL + ACE05", FIG3)
    return Table("CooperKGC Fig. 3 layout: F1 with different expert knowledge backgrounds (NER + RE + EE)",
                 ["Backgrounds", *columns], rows, _note(ran, missing, offline))  # fmt: skip


def kgc_paper_tables(
    exps: Sequence[Mapping[str, Any]], params: Mapping[str, Any], *, offline: bool = False
) -> list[Table]:
    """Table 2 (when any KGC metrics are there), Table 3 and Fig. 3."""
    table2_layout = table2_table(exps, offline=offline)
    return [*([table2_layout] if table2_layout else []), table3_table(exps, params, offline=offline),
            figure3_table(exps, params, offline=offline)]  # fmt: skip
