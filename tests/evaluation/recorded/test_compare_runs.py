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


def test_a_replayed_run_differs_only_in_cache_flags_and_must_hit_for_every_call(tmp_path):
    before, after = tmp_path / "a", tmp_path / "b"
    _write(before, "data/generated/kgc/traces.jsonl", [{"agent": "ner_expert", "reply": "x", "cached": False}])
    _write(after, "data/generated/kgc/traces.jsonl", [{"agent": "ner_expert", "reply": "x", "cached": True}])
    (before / "reports").mkdir()
    (after / "reports").mkdir()
    (before / "reports/usage.json").write_text(json.dumps({"total": {"calls": 2, "cache_hits": 0}}))
    (after / "reports/usage.json").write_text(json.dumps({"total": {"calls": 2, "cache_hits": 2}}))
    assert compare(before, after)[1][0].startswith("data/generated/kgc/traces.jsonl: 1 paths differ")
    assert compare(before, after, replayed=True) == (
        {"identical": 0, "same but clocks": 2, "binary skipped": 0, "differs": 0}, []
    )
    (after / "reports/usage.json").write_text(json.dumps({"total": {"calls": 2, "cache_hits": 1}}))
    assert compare(before, after, replayed=True)[1] == ["not replayed: reports/usage.json: 2 calls, 1 from the cache"]
    (before / "reports/summary.md").write_text("# Summary\nMade 2026-12-07 02:11 UTC\n| f1 | 0.5 |\n")
    (after / "reports/summary.md").write_text("# Summary\nMade 2026-12-07 02:18 UTC\n| f1 | 0.5 |\n")
    assert compare(before, after, replayed=True)[0]["same but clocks"] == 3
    (after / "reports/summary.md").write_text("# Summary\nMade 2026-12-07 02:18 UTC\n| f1 | 0.6 |\n")
    assert "reports/summary.md: text differs" in compare(before, after)[1]
