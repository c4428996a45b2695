"""Sharded generate_tagging (3 shards + merge) gives the files of one run, on scripted replies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from stages.generate_tagging import main as generate
from stages.merge_shards import main as merge
from tests.shard_checks import assert_same_outputs
from tests.tagging.test_stage import write_params
from tests.tiny_models import minilm_dir

GENERATED, REPORTS = Path("data/generated/tagging"), Path("reports/generate_tagging")


def params_with_embedding(folder: Path) -> Path:
    params = write_params(folder)
    text = params.read_text().replace("systems: [team, single_llm]", "systems: [single_llm, team, embedding]")
    text = text.replace("limit: 12}", "limit: 6}")  # CI-sized: 6 evaluated, 6 generation pairs
    params.write_text(text + f"  embedding: {{model: {minilm_dir()}}}\n  split: {{generation_limit: 6}}\n")
    return params


def test_three_shards_and_merge_equal_one_run(tmp_path, monkeypatch):
    one, sharded = tmp_path / "one", tmp_path / "sharded"
    one.mkdir(), sharded.mkdir()
    monkeypatch.chdir(one)
    assert generate(["--params", str(params_with_embedding(one))]) == 0
    monkeypatch.chdir(sharded)
    params = params_with_embedding(sharded)
    stale = sharded / REPORTS / "shards/1-of-3/metrics.png"  # as older code left it
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    for index in range(3):
        assert generate(["--params", str(params), "--shard", f"{index}/3"]) == 0
    assert not list((sharded / REPORTS / "shards").rglob("*.png"))  # the merge draws the run's figure
    shard_rows = [
        len((sharded / GENERATED / f"shards/{i}-of-3/predictions.jsonl").read_text().splitlines()) for i in range(3)
    ]
    assert sum(shard_rows) == 12 and all(n > 0 for n in shard_rows)  # 6 evaluated + 6 generation pairs
    assert not (sharded / GENERATED / "predictions.jsonl").exists()  # shards never write the run's files
    assert merge(["--team", "tagging", "--params", str(params)]) == 0

    assert_same_outputs(
        one / GENERATED,
        sharded / GENERATED,
        byte_identical={"predictions.jsonl", "sft.jsonl", "split.json"},
        traces={"traces.jsonl"},  # the sandbox's duration_s
    )
    assert_same_outputs(
        one / REPORTS,
        sharded / REPORTS,
        byte_identical={"metrics.json", "failures.json", "table.md"},
        run_state={"usage.json"},
    )
    assert (sharded / REPORTS / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((sharded / REPORTS / "metrics.json").read_text())
    assert metrics["n_evaluated"] == 6 and metrics["n_generation_run"] == 6
    plans = metrics["systems"]["team"]["plan_truncation"]["plans"]
    assert metrics["systems"]["embedding"]["mode"] == "top_k" and metrics["systems"]["embedding"]["source"]
    assert metrics["systems"]["team"]["numerical"]["programs_run"] == 12  # the shards' counts added up
    usage = json.loads((sharded / REPORTS / "usage.json").read_text())
    assert usage["roles"]["planner"]["calls"] == plans >= 3  # one plan per concept: a concept stays in one shard

    # a missing shard is an error naming it; the merged files stay as they were
    shutil.rmtree(sharded / REPORTS / "shards/1-of-3")
    assert merge(["--team", "tagging", "--params", str(params)]) == 1


def test_missing_shard_and_other_params_are_errors_naming_them(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path)
    assert generate(["--params", str(params), "--shard", "0/2"]) == 0
    assert merge(["--team", "tagging", "--params", str(params)]) == 1
    err = capsys.readouterr().err
    assert "shard 1/2" in err and "shards/1-of-2/shard.json missing" in err
    assert generate(["--params", str(params), "--shard", "1/2"]) == 0
    (tmp_path / "other").mkdir()
    other = write_params(tmp_path / "other", policy="semantic")  # another failure policy: other results
    assert merge(["--team", "tagging", "--params", str(other)]) == 1
    assert "ran with other params" in capsys.readouterr().err
    assert merge(["--team", "tagging", "--params", str(params)]) == 0
    assert (tmp_path / GENERATED / "predictions.jsonl").exists()


def test_bad_shard_options_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path)
    for bad in ("3/3", "1", "-1/2", "a/b", "0/0"):
        assert generate(["--params", str(params), "--shard", bad]) == 2, bad
        assert "--shard" in capsys.readouterr().err
