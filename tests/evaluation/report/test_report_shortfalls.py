"""Shortfalls the report derives for stages that record none: make_datasets' rows dropped as too long,
build_kb's kinds left with 0 chunks; the evaluate stage's tutoring prompts and KGC's SFT rows
(the metrics below are a real run's: reports/make_datasets and reports/build_kb of a smoke repro,
with the optional sources' kinds emptied as a run without ../shared leaves them)."""

import json

import yaml

from pipelines.config import load_section
from pipelines.evaluation.report.stage_shortfalls import build_kb_shortfalls, make_datasets_shortfalls
from pipelines.kgc.config import KGCConfig
from pipelines.kgc.interface import TEAM
from pipelines.kgc.run import sft_f1_zero
from tests.evaluation.recorded import metrics
from tests.evaluation.report.test_report_stage import PROJECT, _project, _run

MAKE_DATASETS = {"counts": {
    "sft": {"train": 8, "eval": 1, "by_source": {"kgc": 4, "tagging": 5}, "demo_fixture_rows": 0,
            "removed": {"invalid": 0, "duplicates": 0, "too_long": 2}},
    "dpo": {"train": 5, "eval": 1, "by_source": {"ram2c": 6}, "demo_fixture_rows": 0,
            "removed": {"invalid": 0, "duplicates": 0, "too_long": 0}}}}  # fmt: skip
BUILD_KB = {"chunks": 168, "chunks_by_kind": {"teaching_theory": 53, "psychology": 52, "safety": 63},
            "optional_sources_missing": ["class_records (../shared/data/kb/class_records.csv)",
                                         "literature (../shared/data/tutoring/robinson_crusoe.txt)"]}  # fmt: skip


def _lines(found) -> list[str]:
    return [s.line() for s in found if s is not None]


def test_make_datasets_and_build_kb_rules():
    assert _lines(make_datasets_shortfalls(MAKE_DATASETS)) == [
        "9 of 11 SFT rows kept by make_datasets (dropped: 2 longer than train.max_length tokens)"
    ]
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    missing = ", ".join(BUILD_KB["optional_sources_missing"])
    assert sorted(_lines(build_kb_shortfalls(BUILD_KB, params))) == [
        f"knowledge-base kind {kind}: 0 chunks (optional sources missing: {missing})"
        for kind in ("class_records", "literature")
    ]


def test_the_report_lists_them(tmp_path, monkeypatch):
    _project(tmp_path)
    for stage, values in (("make_datasets", MAKE_DATASETS), ("build_kb", BUILD_KB)):
        (tmp_path / f"reports/{stage}").mkdir(parents=True)
        (tmp_path / f"reports/{stage}/metrics.json").write_text(json.dumps(values), encoding="utf-8")
    found = _run(tmp_path, monkeypatch)
    recorded = sum(len(metrics(s)["shortfalls"]) for s in ("generate_tagging", "generate_kgc", "generate_ram2c"))
    assert recorded == 1  # the recorded smoke run: its 2 KGC SFT rows both score F1 0
    assert found["inputs"]["make_datasets"] and found["inputs"]["build_kb"] and found["shortfalls"] == 3 + recorded
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert "| make_datasets | SFT rows kept by make_datasets | 11 | 9 | dropped: 2 longer than train.max_length" in md
    assert "| build_kb | knowledge-base kind literature: 0 chunks | - | - | optional sources missing: " in md


def test_kgc_sft_rows_requested_vs_produced_and_f1_zero(tmp_path):
    """generate_kgc's shortfalls on its recorded metrics: sentences without an SFT row, and SFT rows
    whose answer scored F1 0 (counted from sft.jsonl's meta.f1 by finish_kgc)."""
    sft = tmp_path / "sft.jsonl"
    sft.write_text("".join(json.dumps({"id": f"kgc-{i}", "meta": {"f1": f1}}) + "\n" for i, f1 in enumerate(
        [0.0, 0.5, 0, 1.0])), encoding="utf-8")  # fmt: skip
    assert sft_f1_zero(sft) == 2 and sft_f1_zero(tmp_path / "none.jsonl") == 0
    recorded = metrics("generate_kgc")
    recorded.update(n_evaluated=5, sft_rows=3, sft_f1_zero=1)
    lines = _lines(TEAM.shortfalls({"kgc": load_section("kgc", KGCConfig, PROJECT / "params.yaml")}, recorded))
    assert "3 of 5 sentences giving an SFT row (no qualifying final answer (kgc.sft.keep answer, min_f1 0.0))" in lines
    assert "2 of 3 SFT rows whose answer scores F1 > 0 (1 scored sentence F1 0 (kgc.sft.min_f1 0.0))" in lines
