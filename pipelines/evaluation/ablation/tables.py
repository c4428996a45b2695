"""Ablation tables from ``dvc exp show --json``: one row per experiment (the papers' ablations run
as a queued ``dvc exp`` set), chosen params as columns, chosen metrics with their change from
the baseline commit.

    dvc exp show --json > exps.json
    python -m pipelines.evaluation.ablation.tables exps.json --param ram2c.groups --param ram2c.experts \\
        --metric H=hts.humanized.score --title "RAM2C ablations" -o reports/ablations.md
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.io import atomic_open
from pipelines.reporting.render import table_markdown
from pipelines.reporting.tables import Table, provenance_line


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists are values)."""
    if not isinstance(data, Mapping):
        return {prefix: data} if prefix else {}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _entry(rev: Mapping[str, Any], *, baseline: bool) -> dict[str, Any] | None:
    data = rev.get("data") or {}
    if rev.get("error") or not data:
        return None
    params: dict[str, Any] = {}
    for file, content in (data.get("params") or {}).items():
        prefix = "" if file == "params.yaml" else f"{file}:"
        params.update({prefix + k: v for k, v in flatten((content or {}).get("data", {})).items()})
    metrics = {file: flatten((content or {}).get("data", {})) for file, content in (data.get("metrics") or {}).items()}
    rev_id = str(rev.get("rev"))
    name = rev.get("name") or (rev_id if rev_id == "workspace" else rev_id[:7])
    return {"name": name, "rev": rev.get("rev"), "baseline": baseline,
            "params": params, "metrics": metrics}  # fmt: skip


def experiments(show: Sequence[Mapping[str, Any]], *, include_workspace: bool = False) -> list[dict[str, Any]]:
    """Flat experiments from ``dvc exp show --json``: each baseline commit, then its experiments
    (``{"name", "rev", "baseline", "params": {dotted: value}, "metrics": {file: {dotted: value}}}``).
    Entries with an error or no data are left out."""
    found = []
    for commit in show:
        if commit.get("rev") == "workspace" and not include_workspace:
            continue
        entry = _entry(commit, baseline=commit.get("rev") != "workspace")
        if entry:
            found.append(entry)
        for group in commit.get("experiments") or []:
            for rev in group.get("revs") or []:
                exp = _entry(rev, baseline=False)
                if exp:
                    exp["baseline_rev"] = commit.get("rev")
                    found.append(exp)
    return found


def _lookup(flat: Mapping[str, Any], path: str) -> Any:
    if "*" not in path:
        return flat.get(path)
    return next((flat[k] for k in sorted(flat) if fnmatch.fnmatchcase(k, path)), None)


def metric_value(exp: Mapping[str, Any], key: str) -> Any:
    """A metric by dotted path (``file:path`` to name the file; else the first file having it).
    ``*`` in the path matches any part of a key (the first match in key order), e.g.
    ``tutoring.hts.tables.1.rows.*.humanized.score`` for a row whose label the run chose."""
    if ":" in key:
        file, path = key.split(":", 1)
        return _lookup(exp["metrics"].get(file, {}), path)
    return next((v for m in exp["metrics"].values() if (v := _lookup(m, key)) is not None), None)


def _number(value: Any) -> str:
    return "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))


def _param(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else _number(value)


def ablation_table(
    exps: Sequence[Mapping[str, Any]],
    *,
    params: Sequence[str],
    metrics: Sequence[tuple[str, str]],
    title: str = "Ablations (dvc experiments)",
    provenance: Any = "Params and metrics of each experiment, from dvc exp show --json",
    offline: bool = False,
) -> Table:
    """Rows: experiments; columns: ``params``, then each ``(label, metric key)`` as
    ``value (+change from the baseline commit)``."""
    baselines = {e["rev"]: e for e in exps if e["baseline"]}
    rows = []
    for exp in exps:
        base = baselines.get(exp.get("baseline_rev"))
        cells = [f"{exp['name']}{' (baseline)' if exp['baseline'] else ''}"]
        cells += [_param(exp["params"].get(p)) for p in params]
        for _, key in metrics:
            value, reference = metric_value(exp, key), metric_value(base, key) if base else None
            cell = _number(value)
            if isinstance(value, (int, float)) and isinstance(reference, (int, float)):
                cell += f" ({value - reference:+.2f})"
            cells.append(cell)
        rows.append(cells)
    return Table(title, ["Experiment", *params, *[label for label, _ in metrics]], rows,
                 provenance_line(provenance, offline=offline))  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("show_json", help="output of `dvc exp show --json` ('-' for stdin)")
    parser.add_argument("--param", action="append", default=[], help="dotted params key to show (repeatable)")
    parser.add_argument("--metric", action="append", default=[], help="LABEL=dotted.metric.key (repeatable)")
    parser.add_argument("--title", default="Ablations (dvc experiments)")
    parser.add_argument("--offline-default", action="store_true", help="label the numbers as the offline default")
    parser.add_argument("-o", "--output", help="Markdown file to write (default: stdout)")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.show_json == "-" else Path(args.show_json).read_text(encoding="utf-8")
    metrics = []
    for spec in args.metric:
        label, _, key = spec.partition("=")
        metrics.append((label, key) if key else (spec, spec))
    table = ablation_table(
        experiments(json.loads(text)), params=args.param, metrics=metrics, title=args.title,
        offline=args.offline_default,
    )  # fmt: skip
    if args.output:
        with atomic_open(args.output) as handle:
            handle.write(table_markdown(table))
    else:
        sys.stdout.write(table_markdown(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
