"""The stage function with the offline default model (SmolLM2-135M) and a demo knowledge base
(``data/kb_sources`` embedded with the offline MiniLM): every dialogue ends in a kept or dropped pair, every
vote and step is traced, every output written."""

import json
from pathlib import Path

import pytest

from pipelines.config import load_section
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.run import generate_ram2c
from tests.demo_kb import build_demo_kb
from tests.tiny_models import smollm2_dir

PROJECT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT / "params.yaml"


@pytest.mark.slow
@pytest.mark.first
def test_offline_default_model_and_demo_kb_give_pairs(tmp_path):
    build, retrieval = build_demo_kb(tmp_path, n_rewrites=0)
    cfg = load_section("ram2c", Ram2cConfig, PARAMS)
    sources = [
        s.model_copy(
            update={"path": str(PROJECT / s.path), "fallback": str(PROJECT / s.fallback) if s.fallback else None}
        )
        for s in cfg.sources
    ]
    llm = cfg.llm.model_copy(
        update={
            "default": cfg.llm.default.model_copy(update={"model": str(smollm2_dir())}),
            "cache": str(tmp_path / "c.sqlite"),
        }
    )
    # CI-sized: 4 dialogues (with expert_call separate SmolLM2 kept 50-85% of pairs, the rest "same",
    # and 4 dialogues gave 2 pairs in 2 of 4 runs; with joint, the default, it kept every pair), 2 experts
    # per group, one ballot each on 2 documents, no query rewrites. 9 topics are written, as for 6
    # dialogues at the default oversampling, so that at least 4 survive deduplication
    reflection = cfg.reflection.model_copy(update={"candidates": 2, "vote_call": "per_expert"})
    topics = cfg.topics.model_copy(update={"oversample": 2.25})
    cfg = cfg.model_copy(
        update={
            "sources": sources,
            "llm": llm,
            "dialogues": 4,
            "topics": topics,
            "experts_per_group": 2,
            "reflection": reflection,
            "progress": False,
        }
    )
    metrics = generate_ram2c(cfg, build, retrieval, root=tmp_path)
    out = tmp_path / cfg.outputs.generated_dir
    # the fallback story has 2 passages: 9 topics written, 5-6 survive deduplication, 4 are run. Batched
    # greedy decoding on CPU is not batch-invariant (which requests share a batch changes float rounding),
    # so which pairs survive the gates varies between runs: with expert_call separate SmolLM2 often
    # passed the draft through unchanged ("same") and kept 2-5 of 6; with joint (its analysis then its
    # revision in one bounded reply) it kept 6 of 6 in each run of 6 dialogues. Every dialogue ends in a
    # kept or dropped pair, and at least 3 are kept (the floor).
    assert metrics["dialogues"] == 4 and metrics["dialogues_failed"] == 0, metrics
    assert metrics["turns"] >= metrics["dialogues"], metrics
    assert metrics["pairs_kept"] + metrics["pairs_dropped"] == metrics["turns"], metrics
    assert metrics["pairs_kept"] >= 3, metrics
    assert sum(metrics["dropped_by_reason"].values()) == metrics["pairs_dropped"]
    assert set(metrics["groups"]) == {"T", "P", "E"} and metrics["groups"]["T"]["retrieved"] > 0
    assert metrics["groups"]["T"]["votes"] == metrics["groups"]["T"]["retrieved"] * 2  # every vote recorded
    # per group and turn: 2 ballots, 2 analyses with their revisions (expert_call joint), 1 synthesis (re-asks add some)
    assert 5 <= metrics["groups"]["T"]["llm_calls_per_turn"] < 10
    dpo = [json.loads(line) for line in (out / "dpo.jsonl").read_text().splitlines()]
    assert len(dpo) == metrics["pairs_kept"] and all(
        r["chosen"][0]["content"] != r["rejected"][0]["content"] for r in dpo
    )
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    steps = {(r.get("group"), r.get("step")) for r in traces}
    for group in ("T", "P", "E"):
        for step in ("retrieval", "ballot", "reflection", "analyst_reviser", "synthesizer"):
            assert (group, step) in steps, (group, step)
    ballots = [r for r in traces if r.get("step") == "ballot"]
    assert 0 < len(ballots) <= 4 * 3 * 2 and all(len(r["documents"]) == 2 for r in ballots)
    assert sum(r["ok"] for r in ballots) >= len(ballots) // 2  # constrained JSON: one verdict per document
    info = json.loads((out / "llamafactory" / "dataset_info.json").read_text())
    assert info["ram2c_preference"]["ranking"] is True
    assert (out / "preference" / "dataset_info.json").exists()
