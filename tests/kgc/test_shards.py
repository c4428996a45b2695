"""Sharded generate_kgc (3 shards + merge) gives the files of one run, on scripted replies."""

from __future__ import annotations

import json
from pathlib import Path

from stages.generate_kgc import main as generate
from stages.merge_shards import main as merge
from tests.kgc.test_stage import write_params
from tests.shard_checks import assert_same_outputs

GENERATED, REPORTS = Path("data/generated/kgc"), Path("reports/generate_kgc")


def test_three_shards_and_merge_equal_one_run(tmp_path, monkeypatch):
    one, sharded = tmp_path / "one", tmp_path / "sharded"
    one.mkdir(), sharded.mkdir()
    systems = "[cooperkgc, autokg, self_consistency]"
    monkeypatch.chdir(one)
    assert generate(["--params", str(write_params(one, systems=systems))]) == 0
    monkeypatch.chdir(sharded)
    params = write_params(sharded, systems=systems)
    stale = sharded / REPORTS / "shards/1-of-3/rounds.png"  # as older code left it
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"not this run's")
    for index in (2, 0, 1):  # any order, e.g. a Slurm array
        assert generate(["--params", str(params), "--shard", f"{index}/3"]) == 0
    rows = [json.loads(x) for x in (sharded / GENERATED / "shards/1-of-3/predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 4  # 11 sentences: shard 1 has positions 1, 4, 7, 10
    assert merge(["--team", "kgc", "--params", str(params), "--count", "3"]) == 0

    assert_same_outputs(
        one / GENERATED, sharded / GENERATED, byte_identical={"predictions.jsonl", "sft.jsonl"}, traces={"traces.jsonl"}
    )  # the trace rows of a sample are in the order its concurrent experts finished
    assert_same_outputs(
        one / REPORTS,
        sharded / REPORTS,
        byte_identical={"metrics.json", "failures.json", "table.md", "per_type.md", "rounds.csv", "datasets.json"},
        run_state={"usage.json"},
        roots=(one, sharded),  # datasets.json names the files read
    )
    # a shard draws no figure (no matplotlib in a shard process); the merge draws the one run's
    assert sorted(p.name for p in (sharded / REPORTS / "shards").rglob("*.png")) == []
    assert sorted(p.name for p in (sharded / REPORTS / "shards").rglob("rounds.csv")) == ["rounds.csv"] * 3
    assert (sharded / REPORTS / "rounds.png").read_bytes() == (one / REPORTS / "rounds.png").read_bytes()
    metrics = json.loads((sharded / REPORTS / "metrics.json").read_text())
    assert metrics["n_evaluated"] == 11 and set(metrics["systems"]) == {
        "cooperkgc@0shot",
        "autokg@0shot",
        "self_consistency@0shot",
    }
    team = metrics["systems"]["cooperkgc@0shot"]
    assert team["datasets"]["conllpp"]["overall"]["f1"] == 0.125 and team["llm_calls"] == 99  # 11 x 3 experts x 3
