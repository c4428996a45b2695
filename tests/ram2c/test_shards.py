"""Sharded generate_ram2c (3 shards + merge) gives the files of one run, on scripted replies.

Every shard writes every topic (the topic phase is not per dialogue) and runs its share of the
dialogues; the merge takes shard 0's topics after checking they are the same in every shard."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from pipelines.agents.shards import ShardConfig, params_fingerprint
from pipelines.agents.shortfalls import flag_shortfalls
from pipelines.config import load_section
from pipelines.llm.client import LLMRuntime, backend_key
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.interface import TEAM
from pipelines.ram2c.run import generate_ram2c
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.stage import write_metrics
from stages.merge_shards import main as merge
from tests.ram2c.scripted import DOCS, FakeRetriever, backend
from tests.shard_checks import assert_same_outputs

PROJECT = Path(__file__).resolve().parents[2]
GENERATED, REPORTS = Path("data/generated/ram2c"), Path("reports/generate_ram2c")


def write_params(folder: Path) -> tuple[Path, Ram2cConfig, BuildKBConfig, RetrievalConfig]:
    """A CI-sized RAM2C section (5 dialogues, 2 experts per group, 1 document voted on) in ``folder``."""
    build = load_section("build_kb", BuildKBConfig, PROJECT / "params.yaml")
    retrieval = load_section("retrieval", RetrievalConfig, PROJECT / "params.yaml")
    cfg = Ram2cConfig(
        llm={"default": {"kind": "scripted", "replies": "unused.jsonl"}, "cache": str(folder / "llm.sqlite")},
        sources=[{"language": "en", "path": str(PROJECT / "data/ram2c/lighthouse.en.txt")}],
        output_mode="text",
        dialogues=5,
        experts_per_group=2,
        reflection={"candidates": 1},
        progress=False,
    )
    params = folder / "params.yaml"
    sections = {"ram2c": cfg, "build_kb": build, "retrieval": retrieval}
    params.write_text(yaml.safe_dump({k: v.model_dump(mode="json") for k, v in sections.items()}, sort_keys=False))
    return params, cfg, build, retrieval


def sections_of(cfg: Ram2cConfig, build, retrieval) -> dict:
    return {"ram2c": cfg, "build_kb": build, "retrieval": retrieval}


def run(folder: Path, cfg: Ram2cConfig, build, retrieval) -> dict:
    runtime = LLMRuntime(cfg.llm, backends={backend_key(cfg.llm.default): backend()})
    try:
        return generate_ram2c(cfg, build, retrieval, root=folder, runtime=runtime, retriever=FakeRetriever(DOCS))
    finally:
        asyncio.run(runtime.close())


def test_three_shards_and_merge_equal_one_run(tmp_path, monkeypatch):
    one, sharded = tmp_path / "one", tmp_path / "sharded"
    one.mkdir(), sharded.mkdir()
    _, cfg, build, retrieval = write_params(one)
    metrics = run(one, cfg, build, retrieval)
    found = TEAM.shortfalls(sections_of(cfg, build, retrieval), metrics)
    metrics["shortfalls"] = flag_shortfalls("generate_ram2c", found)
    write_metrics(one / REPORTS / "metrics.json", metrics)  # what the stage writes for one run
    params, cfg, build, retrieval = write_params(sharded)
    for index in range(3):
        metrics = run(sharded, cfg.model_copy(update={"shard": ShardConfig(index=index, count=3)}), build, retrieval)
        assert metrics["dialogues"] == 5 and metrics["pairs_kept"] + metrics["pairs_dropped"] == 2 - (index == 2)
    monkeypatch.chdir(sharded)
    assert merge(["--team", "ram2c", "--params", str(params)]) == 0

    assert_same_outputs(
        one / GENERATED,
        sharded / GENERATED,
        byte_identical={
            "predictions.jsonl",
            "dpo.jsonl",
            "sft.jsonl",
            "dialogues.jsonl",
            "dropped.jsonl",
            "topics/predictions.jsonl",
            "topics/dropped.jsonl",
            "llamafactory/dataset_info.json",
            "llamafactory/ram2c_preference.json",
            "llamafactory/ram2c_preference_sft.json",
            "preference/dataset_info.json",
            "preference/state.json",
        },
        traces={"traces.jsonl", "topics/traces.jsonl"},
    )
    assert_same_outputs(
        one / REPORTS, sharded / REPORTS, byte_identical={"failures.json"}, run_state={"usage.json", "metrics.json"}
    )
    metrics = json.loads((sharded / REPORTS / "metrics.json").read_text())
    assert metrics["dialogues"] == 5 and metrics["pairs_kept"] >= 1 and metrics["exports"]["dpo.jsonl"] >= 1
    usage = json.loads((sharded / REPORTS / "usage.json").read_text())
    topics = json.loads((sharded / REPORTS / "topics/usage.json").read_text())
    assert usage["roles"]["topic_writer"]["calls"] == topics["roles"]["topic_writer"]["calls"] > 0  # counted once


def test_shards_with_other_topics_are_not_merged(tmp_path, monkeypatch, capsys):
    params, cfg, build, retrieval = write_params(tmp_path)
    for index in range(2):
        run(tmp_path, cfg.model_copy(update={"shard": ShardConfig(index=index, count=2)}), build, retrieval)
    topics = tmp_path / GENERATED / "shards/1-of-2/topics/predictions.jsonl"
    manifest_path = tmp_path / REPORTS / "shards/1-of-2/shard.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["shared"]["=generated:topics/predictions.jsonl"] = "0" * 64  # as if shard 1 wrote other topics
    manifest_path.write_text(json.dumps(manifest))
    monkeypatch.chdir(tmp_path)
    assert topics.exists() and merge(["--team", "ram2c", "--params", str(params)]) == 1
    assert "topics/predictions.jsonl differs between shard 0 and shards [1]" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [{"index": 3, "count": 3}, {"index": -1, "count": 2}, {"count": 0}])
def test_bad_shard_config_is_rejected(bad):
    with pytest.raises(ValueError, match="shard|greater than or equal"):
        Ram2cConfig(llm={"default": {"kind": "scripted", "replies": "x.jsonl"}}, shard=bad)


def test_ram2c_n_rewrites_is_in_the_configured_retrieval_and_its_fingerprint(tmp_path):
    """The stage and the merge configure the sections once (RAM2C.configure): ``ram2c.n_rewrites``
    over ``retrieval.n_rewrites``, so both fingerprint the retrieval the run queried with; a run
    given the unconfigured retrieval section is refused, naming the fix."""
    _, cfg, build, retrieval = write_params(tmp_path)
    cfg = cfg.model_copy(update={"n_rewrites": 0})
    loaded = sections_of(cfg, build, retrieval)
    configured = TEAM.configure(loaded)
    assert retrieval.n_rewrites == 2 and configured["retrieval"].n_rewrites == 0
    assert configured["ram2c"] is cfg and configured["build_kb"] is build
    assert TEAM.fingerprint(configured) == params_fingerprint(cfg, build, configured["retrieval"])
    assert TEAM.fingerprint(configured) != TEAM.fingerprint(loaded)
    unset = sections_of(cfg.model_copy(update={"n_rewrites": None}), build, retrieval)
    assert TEAM.configure(unset)["retrieval"].n_rewrites == 2  # null: retrieval.n_rewrites
    with pytest.raises(ValueError, match="ram2c.n_rewrites is 0 but the retrieval section passed has n_rewrites 2"):
        generate_ram2c(cfg, build, retrieval, root=tmp_path)
