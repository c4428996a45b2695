"""Helpers of the shard-and-merge tests: compare a merged run's files with one run's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Fields that differ between any two runs, sharded or not: wall-clock timings, and whether a
# request was answered from the cache (two samples asking the same request: whichever comes
# second hits the cache, a race inside one run too).
RUN_STATE_KEYS = frozenset(
    {"latency_s", "latency_mean_s", "latency_p50_s", "latency_p95_s", "wall_s", "duration_s", "cached", "cache_hits"}
)


def drop_run_state(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_run_state(v) for k, v in value.items() if k not in RUN_STATE_KEYS}
    if isinstance(value, list):
        return [drop_run_state(v) for v in value]
    return value


def by_sample(rows: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Trace rows grouped by sample (in order), each sample's rows sorted: the steps of one
    sample are written in the order they finished, which concurrent agents make vary."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        groups.setdefault(row["sample_id"], []).append(json.dumps(drop_run_state(row), sort_keys=True))
    return [(sample, sorted(lines)) for sample, lines in groups.items()]


def files_under(folder: Path) -> set[str]:
    """Relative paths of every file under ``folder``, the shard folders left out."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and "shards" not in p.parts}


def assert_same_outputs(
    one: Path,
    merged: Path,
    *,
    byte_identical: set[str],
    run_state: set[str] = frozenset(),
    traces: set[str] = frozenset(),
    roots: tuple[Path, Path] | None = None,
) -> None:
    """Every file of one run is in the merged folder; those in ``byte_identical`` are equal byte
    for byte, those in ``run_state`` (JSON) equal once :data:`RUN_STATE_KEYS` are dropped, and
    ``traces`` (JSONL) have the same samples in the same order, each with the same rows so compared.
    ``roots``: the two runs' folders, when their params name files inside them (paths in outputs)."""
    assert files_under(one) <= files_under(merged), files_under(one) - files_under(merged)

    def read(folder: Path, name: str) -> str:
        text = (folder / name).read_text(encoding="utf-8")
        return text.replace(str(roots[0]), str(roots[1])) if roots and folder == one else text

    for name in byte_identical:
        assert read(one, name) == read(merged, name), name  # bytes as text (utf-8), folder named alike
    for name in run_state:
        assert drop_run_state(json.loads(read(one, name))) == drop_run_state(json.loads(read(merged, name))), name
    for name in traces:
        rows_a = [json.loads(line) for line in read(one, name).splitlines()]
        rows_b = [json.loads(line) for line in read(merged, name).splitlines()]
        assert len(rows_a) == len(rows_b) > 0, name
        for (sample_a, a), (sample_b, b) in zip(by_sample(rows_a), by_sample(rows_b), strict=True):
            assert sample_a == sample_b and a == b, (name, sample_a, sample_b)
