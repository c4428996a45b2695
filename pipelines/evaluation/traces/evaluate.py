"""The evaluate stage's traces as teams of the trace browser, from its ``outputs.traces_dir``
(``data/evaluate``):

- ``evaluate <system>_vs_<baseline>``, one per tutoring comparison
  (``tutoring/comparisons/<key>/traces.jsonl``: every judge call with its rendered prompt and
  verdict); each item's record holds the prompt (``tutoring/prompts.jsonl``), both replies
  (``tutoring/replies/<system>/predictions.jsonl``) and every judgment (``judgments.jsonl``). A tie
  (the two replies the same text) has judgments but no call: it gets one step saying so;
- ``evaluate <tagging|kgc> <base|tuned>``: the held-out items' traces of each arm, with their
  predictions rows.

    teams, records = evaluate_teams(Path("data/evaluate"))   # {team: rows}, {team: {id: record}}
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pipelines.evaluation.traces.browser import read_records, read_trace_rows

TIE_STEP = "identical replies: equal for every judge and dimension, no judge call"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return read_trace_rows(path)[0] if path.exists() else []


def comparison_team(folder: Path, prompts: dict[str, dict], replies: dict[str, dict[str, str]]) -> tuple[list, dict]:
    """Rows and records of one comparison folder (``<system>_vs_<baseline>``)."""
    system, _, baseline = folder.name.partition("_vs_")
    rows = _jsonl(folder / "traces.jsonl")
    judgments: dict[str, list[dict]] = defaultdict(list)
    for judgment in _jsonl(folder / "judgments.jsonl"):
        judgments[str(judgment.get("item_id"))].append(judgment)
    called = {str(r.get("sample_id")) for r in rows}
    for item, found in judgments.items():
        if item not in called and any(j.get("tie") for j in found):
            rows.append({"sample_id": item, "agent": "tie", "role": "hts_judge", "ok": True, "tie": True,
                         "parsed": {"verdict": "equal", "judgments": len(found)}, "note": TIE_STEP})  # fmt: skip
    records = {
        item: {
            "comparison": folder.name,
            "prompt": prompts.get(item) or {},
            "replies": {name: replies.get(name, {}).get(item) for name in (system, baseline)},
            "judgments": found,
        }
        for item, found in judgments.items()
    }
    return rows, records


def evaluate_teams(traces_dir: Path) -> tuple[dict[str, list[dict]], dict[str, dict[str, dict]]]:
    """``({team: trace rows}, {team: {sample id: record}})`` of what evaluate wrote under
    ``traces_dir`` (empty when it has not run)."""
    teams: dict[str, list[dict]] = {}
    records: dict[str, dict[str, dict]] = {}
    tutoring = traces_dir / "tutoring"
    prompts = {str(p.get("id")): p for p in _jsonl(tutoring / "prompts.jsonl")}
    replies = {
        folder.name: {i: str(r.get("reply")) for i, r in read_records(folder / "predictions.jsonl").items()}
        for folder in sorted((tutoring / "replies").glob("*"))
        if (folder / "predictions.jsonl").exists()
    }
    for folder in sorted((tutoring / "comparisons").glob("*_vs_*")):
        rows, found = comparison_team(folder, prompts, replies)
        if rows:
            teams[f"evaluate {folder.name}"], records[f"evaluate {folder.name}"] = rows, found
    for system in ("tagging", "kgc"):
        for arm in ("base", "tuned"):
            folder = traces_dir / system / arm
            rows = _jsonl(folder / "traces.jsonl")
            if rows:
                teams[f"evaluate {system} {arm}"] = rows
                if (folder / "predictions.jsonl").exists():
                    records[f"evaluate {system} {arm}"] = read_records(folder / "predictions.jsonl")
    return teams, records
