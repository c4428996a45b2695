"""Helpers of the shard-and-merge tests: compare a merged run's files with one run's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Timing fields: wall-clock measurements, never equal between two runs (sharded or not).
TIMING_KEYS = frozenset({"latency_s", "latency_mean_s", "latency_p50_s", "latency_p95_s", "wall_s", "duration_s"})


def drop_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [drop_timing(v) for v in value]
    return value


def files_under(folder: Path) -> set[str]:
    """Relative paths of every file under ``folder``, the shard folders left out."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and "shards" not in p.parts}


def assert_same_outputs(one: Path, merged: Path, *, byte_identical: set[str], timing: set[str] = frozenset()) -> None:
    """Every file of one run is in the merged folder; those in ``byte_identical`` are equal byte
    for byte, those in ``timing`` (JSON or JSONL) equal once timing fields are dropped."""
    assert files_under(one) <= files_under(merged), files_under(one) - files_under(merged)
    for name in byte_identical:
        assert (one / name).read_bytes() == (merged / name).read_bytes(), name
    for name in timing:
        a, b = (one / name).read_text(encoding="utf-8"), (merged / name).read_text(encoding="utf-8")
        if name.endswith(".jsonl"):
            rows_a = [drop_timing(json.loads(line)) for line in a.splitlines()]
            rows_b = [drop_timing(json.loads(line)) for line in b.splitlines()]
            assert len(rows_a) == len(rows_b), name
            for i, (x, y) in enumerate(zip(rows_a, rows_b, strict=True)):
                assert x == y, (name, i)
        else:
            assert drop_timing(json.loads(a)) == drop_timing(json.loads(b)), name
