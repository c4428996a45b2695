"""Shards of a harness run: which samples a shard gets, its manifest, and the merge into one run's files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pipelines.agents.harness import EmptyEvaluation, GenerationOutputs, run_systems
from pipelines.agents.merge import ShardMergeError, merge_shard_outputs
from pipelines.agents.shards import ShardConfig, params_fingerprint, write_manifest
from pipelines.llm.accounting import (
    Accounting,
    accounting_from,
    usage_delta,
    usage_scope,
    usage_snapshot,
    usage_sum,
)
from tests.agents.test_harness import Backend, systems_over
from tests.shard_checks import assert_same_outputs


def test_shard_config_is_strict_and_parses_index_over_count():
    assert ShardConfig.parse("2/3") == ShardConfig(index=2, count=3) and ShardConfig().active is False
    assert ShardConfig.parse("2/3").folder == "shards/2-of-3"
    bad_options = [("3/3", "below shard.count"), ("1", "INDEX/COUNT"), ("-1/2", "INDEX/COUNT"), ("0/0", "greater than")]
    for bad, message in bad_options:
        with pytest.raises(ValueError, match=message):
            ShardConfig.parse(bad)
    with pytest.raises(ValueError, match="numbered 0..1"):
        ShardConfig(index=2, count=2)
    with pytest.raises(ValueError, match="Extra inputs"):
        ShardConfig.model_validate({"index": 0, "count": 2, "of": 3})


def test_positions_by_order_or_by_group():
    assert [ShardConfig(index=i, count=3).positions(7) for i in range(3)] == [[0, 3, 6], [1, 4], [2, 5]]
    groups = ["a", "a", "b", "c", "b", "a", "d"]  # groups numbered by first appearance: a0 b1 c2 d3
    assert [ShardConfig(index=i, count=2).positions(7, groups) for i in range(2)] == [[0, 1, 3, 5], [2, 4, 6]]
    assert ShardConfig().positions(3, groups[:3]) == [0, 1, 2]


def test_shard_outputs_go_to_their_own_folders(tmp_path):
    outputs = GenerationOutputs(generated_dir="data/gen", reports_dir="reports/gen")
    assert ShardConfig().outputs(outputs, tmp_path).generated_dir == str(tmp_path / "data/gen")
    moved = ShardConfig(index=1, count=4).outputs(outputs, tmp_path)
    assert moved.generated_dir == str(tmp_path / "data/gen/shards/1-of-4")
    assert moved.reports_dir == str(tmp_path / "reports/gen/shards/1-of-4")


def test_fingerprint_ignores_what_never_changes_results():
    from pipelines.tagging.config import TaggingConfig

    llm = {"default": {"kind": "scripted", "replies": "r.jsonl"}, "cache": "cache/a.sqlite"}
    cfg = TaggingConfig(llm=llm)
    same = TaggingConfig(
        llm={**llm, "cache": "cache/shard1.sqlite"}, shard={"index": 1, "count": 2}, progress=False, concurrency=64
    )
    assert params_fingerprint(cfg) == params_fingerprint(same)
    assert params_fingerprint(cfg) != params_fingerprint(TaggingConfig(llm=llm, output_mode="text"))


def test_raw_usage_adds_up_exactly():
    accounting = Accounting()
    accounting.record("judge", prompt_tokens=10, completion_tokens=2, cached=False, latency_s=0.5)
    before = usage_snapshot(accounting)
    with usage_scope("team"):
        accounting.record("judge", prompt_tokens=7, completion_tokens=1, cached=True, latency_s=0.0)
        accounting.record("voter", prompt_tokens=3, completion_tokens=1, cached=False, latency_s=0.25)
    delta = usage_delta(usage_snapshot(accounting), before)
    assert delta["roles"]["judge"] == {
        "calls": 1,
        "cache_hits": 1,
        "errors": 0,
        "not_cached": 0,
        "prompt_tokens": 7,
        "completion_tokens": 1,
        "latencies": [],
    }
    rebuilt = accounting_from(usage_sum([before, delta]))
    assert rebuilt.report() == accounting.report()


def run_shard(items, folder: Path, shard: ShardConfig, *, backend=None):
    accounting = Accounting()
    outputs = shard.outputs(GenerationOutputs(generated_dir="gen", reports_dir="rep"), folder)
    report = asyncio.run(
        run_systems(
            items,
            systems_over(backend or Backend(delay_s=0.0), accounting),
            accounting=accounting,
            outputs=outputs,
            sample_id=lambda i: f"s{i}",
            prediction_row=lambda i, preds: {"id": f"s{i}", "predictions": preds},
            exports={"rows.jsonl": lambda i, results: [{"id": f"s{i}"}] * (i % 3)},  # 0, 1 or 2 rows a sample
            fixed_predictions={"baseline": [i % 2 for i in items]},
            progress=False,
            shard=shard,
        )
    )
    write_manifest(shard, outputs, report, fingerprint="f", context={"n": len(items)}, counters={"plans": 1})
    return report


def test_four_shards_merge_into_the_files_of_one_run(tmp_path):
    items = list(range(1, 31))
    run_shard(items, tmp_path / "one", ShardConfig())
    reports = [run_shard(items, tmp_path / "sharded", ShardConfig(index=i, count=4)) for i in (3, 1, 0, 2)]
    assert sorted(r.samples for r in reports) == [7, 7, 8, 8]
    outputs = GenerationOutputs(generated_dir=str(tmp_path / "sharded/gen"), reports_dir=str(tmp_path / "sharded/rep"))
    merged = merge_shard_outputs(outputs, fingerprint="f")
    assert merged.count == 4 and merged.context == {"n": 30} and merged.counters == {"plans": 4}
    assert merged.report.written == {"predictions.jsonl": 30, "traces.jsonl": 120, "rows.jsonl": 30}
    assert merged.report.systems["single"].failed_subtasks == 6  # multiples of 5 never parse
    assert merged.report.systems["pair"].usage["total"]["calls"] == 60
    assert_same_outputs(
        tmp_path / "one/gen",
        tmp_path / "sharded/gen",
        byte_identical={"predictions.jsonl", "rows.jsonl"},
        traces={"traces.jsonl"},
    )
    assert_same_outputs(
        tmp_path / "one/rep", tmp_path / "sharded/rep", byte_identical={"failures.json"}, run_state={"usage.json"}
    )


def test_missing_incomplete_or_foreign_shards_are_errors_naming_them(tmp_path):
    items = list(range(1, 11))
    outputs = GenerationOutputs(generated_dir=str(tmp_path / "gen"), reports_dir=str(tmp_path / "rep"))
    with pytest.raises(ShardMergeError, match="no shard folders"):
        merge_shard_outputs(outputs, fingerprint="f")
    run_shard(items, tmp_path, ShardConfig(index=0, count=3))
    run_shard(items, tmp_path, ShardConfig(index=2, count=3))
    with pytest.raises(ShardMergeError, match=r"shard 1/3 \(.*shards/1-of-3/shard.json missing"):
        merge_shard_outputs(outputs, fingerprint="f")
    run_shard(items, tmp_path, ShardConfig(index=1, count=3))
    with pytest.raises(ShardMergeError, match="shard 0/3 ran with other params"):
        merge_shard_outputs(outputs, fingerprint="other")
    traces = tmp_path / "gen/shards/1-of-3/traces.jsonl"
    traces.write_text("".join(traces.read_text().splitlines(keepends=True)[:-1]))  # a row lost
    with pytest.raises(ShardMergeError, match="shard 1/3: traces.jsonl has fewer rows"):
        merge_shard_outputs(outputs, fingerprint="f")
    assert not (tmp_path / "gen/predictions.jsonl").exists()  # checked before anything is written
    run_shard(items, tmp_path, ShardConfig(index=1, count=2))
    with pytest.raises(ShardMergeError, match="several counts"):
        merge_shard_outputs(outputs, fingerprint="f")
    with pytest.raises(ShardMergeError, match=r"shard 0/2 \(.*missing"):  # of 2 shards only the second ran
        merge_shard_outputs(outputs, fingerprint="f", count=2)


def test_a_shard_without_samples_is_an_error():
    with pytest.raises(EmptyEvaluation, match="shard 3/4 has no samples"):
        run_shard([1, 2, 3], Path("unused"), ShardConfig(index=3, count=4))


def test_count_one_writes_no_manifest(tmp_path):
    run_shard([1, 2], tmp_path, ShardConfig())
    assert not (tmp_path / "rep/shard.json").exists() and (tmp_path / "gen/predictions.jsonl").exists()
    assert json.loads((tmp_path / "rep/failures.json").read_text())["samples"] == 2


def test_shards_that_disagree_on_the_shared_context_are_not_merged(tmp_path):
    items = list(range(1, 7))
    for index in range(2):
        run_shard(items, tmp_path, ShardConfig(index=index, count=2))
    manifest_path = tmp_path / "rep/shards/1-of-2/shard.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["context"]["n"] = 5  # as if shard 1 had computed another value
    manifest_path.write_text(json.dumps(manifest))
    outputs = GenerationOutputs(generated_dir=str(tmp_path / "gen"), reports_dir=str(tmp_path / "rep"))
    with pytest.raises(ShardMergeError, match="shard 1/2 differs from shard 0 in n "):
        merge_shard_outputs(outputs, fingerprint="f")
    assert not (tmp_path / "gen/predictions.jsonl").exists()  # nothing written
