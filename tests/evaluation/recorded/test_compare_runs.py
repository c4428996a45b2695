"""The run comparison used to show a refactor leaves the outputs unchanged (compare_runs)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.evaluation.recorded.compare_runs import compare, is_clock


def _write(root: Path, name: str, rows: list[dict]) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_clock_keys_are_told_from_values():
    assert is_clock("wall_s") and is_clock("systems.team.usage.latency_mean") and is_clock("[2].started")
    assert not is_clock("systems.team.f1") and not is_clock("sft_rows") and not is_clock("predictions.team")


def test_identical_clock_only_and_real_differences(tmp_path):
    before, after = tmp_path / "a", tmp_path / "b"
    rows = [{"id": "1", "predictions": {"team": 1}}, {"id": "2", "predictions": {"team": 0}}]
    for root in (before, after):
        _write(root, "data/generated/tagging/predictions.jsonl", rows)
    _write(before, "reports/generate_tagging/metrics.json", [{"f1": 0.5, "wall_s": 3.1}])
    _write(after, "reports/generate_tagging/metrics.json", [{"f1": 0.5, "wall_s": 2.9}])
    assert compare(before, after) == ({"identical": 1, "same but clocks": 1, "binary skipped": 0, "differs": 0}, [])
    _write(after, "data/generated/tagging/predictions.jsonl", [rows[0], {"id": "2", "predictions": {"team": 1}}])
    _write(after, "data/generated/tagging/sft.jsonl", rows)
    counts, problems = compare(before, after)
    assert counts["differs"] == 2
    assert problems == [
        "only in after: data/generated/tagging/sft.jsonl",
        "data/generated/tagging/predictions.jsonl: 1 paths differ, e.g. ['[1].predictions.team']",
    ]
