"""The human rating pack of the evaluate stage (``evaluate.tutoring.human``) and its import.

The stage writes, into ``human.folder`` (default ``reports/evaluate/human/``): ``sheet_<rater>.csv``
per rater, ``form.html`` (every rater's sheet; self-contained, opens from disk), ``key.csv`` (keep
it from the raters) and ``pack.json`` (the comparisons, their table rows and the scoring settings).
Every comparison of the run is in the pack: per rater, comparison and dimension ``sample`` of its
items, positions balanced per rater.

The filled sheets (or the CSVs the form saves) come back with one command, which scores them like
the LLM judges (4/2/0, Fleiss' kappa across the raters, bootstrap intervals) and writes the RAM2C
Tables 1-3 with a human-panel row beside each LLM-judged row::

    python -m pipelines.evaluation.human.pack ratings_Ann.csv ratings_Bo.csv [--pack reports/evaluate/human]
        [--metrics reports/evaluate/metrics.json]

It writes ``<pack>/scores.json`` (the tables, in the metrics' layout) and ``<pack>/tables.md``, and
never touches the stage's own ``metrics.json`` (a DVC output).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.evaluation.arms.tutoring_config import comparison_key
from pipelines.evaluation.hts.scoring import hts_scores
from pipelines.evaluation.human.form import write_rating_pack
from pipelines.evaluation.human.sheets import read_csv, read_ratings
from pipelines.io import atomic_open, write_json_atomic
from pipelines.reporting.render import table_markdown
from pipelines.reporting.tables import hts_tables

PANEL = "human panel"


def write_human_pack(
    cfg: Any,
    items: Mapping[tuple[str, str], Sequence[Any]],
    *,
    labels: Mapping[str, str],
    tables: Mapping[str, Sequence[tuple[str, str]]],
    root: Path,
    dimensions: Sequence[str],
    language: str,
    scoring: Mapping[str, Any],
    passages: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Write the pack (see the module docstring); returns what the metrics record of it.
    ``passages``: ``{item id: book passage}``, shown with the criteria that need it."""
    folder = root / cfg.folder
    comparisons = {comparison_key(*pair): list(values) for pair, values in items.items()}
    paths = write_rating_pack(
        folder,
        comparisons,
        cfg.raters,
        dimensions=dimensions,
        seed=cfg.seed,
        sample=cfg.sample,
        language=language,
        passages=passages,
    )
    described = {
        comparison_key(*pair): {
            "label": f"{labels[pair[0]]} vs {labels[pair[1]]}",
            "tables": [t for t, pairs in tables.items() if tuple(pair) in {tuple(p) for p in pairs}],
            "items": len(values),
        }
        for pair, values in items.items()
    }
    pack = {
        "comparisons": described,
        "raters": list(cfg.raters),
        "dimensions": list(dimensions),
        "sample": cfg.sample,
        "seed": cfg.seed,
        "language": language,
        "scoring": dict(scoring),
    }
    write_json_atomic(folder / "pack.json", pack)
    rows = {r: len(read_csv(p)) for r, p in zip(cfg.raters, paths["sheets"], strict=True)}
    return {
        "folder": str(cfg.folder),
        "raters": list(cfg.raters),
        "rows_per_rater": rows,
        "import": f"python -m pipelines.evaluation.human.pack <filled CSVs> --pack {cfg.folder}",
    }


def panel_tables(pack: Mapping[str, Any], judged: Mapping[str, Any], llm_tables: Mapping[str, Any]) -> dict:
    """Tables 1-3 (the metrics' ``tables`` layout): per comparison the LLM-judged row (when the
    stage's metrics have it) and the human panel's row."""
    tables: dict[str, Any] = {}
    raters = len(pack["raters"])
    for key, comparison in pack["comparisons"].items():
        if key not in judged:
            continue
        for table in comparison["tables"]:
            entry = tables.setdefault(table, {"rows": {}, "provenance": ""})
            llm_row = (llm_tables.get(table) or {}).get("rows", {}).get(comparison["label"])
            if llm_row is not None:
                entry["rows"][f"{comparison['label']} (LLM judges)"] = llm_row
            entry["rows"][f"{comparison['label']} ({PANEL})"] = judged[key]
            entry["provenance"] = (
                f"human panel: {raters} raters ({', '.join(pack['raters'])}), up to {pack['sample'] or 'all'} items "
                "per comparison and dimension each, positions balanced per rater; kappa across the raters"
                + ("; LLM-judged rows from the evaluate stage's metrics" if llm_tables else "")
            )
    return tables


def import_ratings(paths: Sequence[Path], *, pack_dir: Path, metrics: Path | None) -> dict[str, Any]:
    """Score the filled sheets; write ``scores.json`` and ``tables.md`` into ``pack_dir``."""
    pack = json.loads((pack_dir / "pack.json").read_text(encoding="utf-8"))
    judgments, problems = read_ratings(paths, pack_dir / "key.csv")
    scoring = pack["scoring"]
    judged = {
        key: hts_scores(
            js,
            resamples=scoring["resamples"],
            seed=scoring["seed"],
            confidence=scoring["confidence"],
            min_items=scoring["min_items"],
        )
        for key, js in judgments.items()
    }
    llm_tables = {}
    if metrics is not None and metrics.exists():
        llm_tables = (
            (json.loads(metrics.read_text(encoding="utf-8")).get("tutoring") or {}).get("hts", {}).get("tables", {})
        )
    tables = panel_tables(pack, judged, llm_tables)
    result = {
        "tables": tables,
        "problems": problems,
        "files": [str(p) for p in paths],
        "judgments": sum(len(v) for v in judgments.values()),
    }
    write_json_atomic(pack_dir / "scores.json", result)
    with atomic_open(pack_dir / "tables.md") as handle:
        handle.write("# Human ratings\n\n" + "\n".join(table_markdown(t) for t in hts_tables({"tables": tables})))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.evaluation.human.pack",
        description="Import filled human rating sheets into the HTS Tables 1-3.",
    )
    parser.add_argument(
        "ratings", nargs="+", type=Path, help="filled sheet_<rater>.csv or the form's ratings_<rater>.csv"
    )
    parser.add_argument(
        "--pack", type=Path, default=Path("reports/evaluate/human"), help="the pack folder (pack.json, key.csv)"
    )
    parser.add_argument(
        "--metrics",
        type=Path,
        default=Path("reports/evaluate/metrics.json"),
        help="the evaluate stage's metrics, for the LLM-judged rows beside the panel's",
    )
    args = parser.parse_args(argv)
    for path in [*args.ratings, args.pack / "pack.json", args.pack / "key.csv"]:
        if not path.exists():
            print(f"error: {path} not found", file=sys.stderr)
            return 1
    result = import_ratings(args.ratings, pack_dir=args.pack, metrics=args.metrics)
    for problem in result["problems"]:
        print(f"skipped: {problem}", file=sys.stderr)
    print(f"{result['judgments']} ratings imported; wrote {args.pack / 'tables.md'} and {args.pack / 'scores.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
