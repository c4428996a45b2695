"""The report stage from fixture metrics files (each stage's real key set): the summary's table
rows, plots and plot CSVs, the trace browser, which inputs were found; a partial set of inputs
and an unreadable one are notes, not errors; offline_default follows the generating backends."""

import json
import re
from pathlib import Path

import yaml

from pipelines.evaluation.report.config import ReportConfig
from pipelines.evaluation.report.inputs import offline_default
from stages import report as stage
from tests.evaluation.report_fixtures import evaluate_metrics, write_all_inputs, write_params

PROJECT = Path(__file__).resolve().parents[2]


def _run(root, monkeypatch) -> dict:
    monkeypatch.chdir(root)
    assert stage.main(["--params", "params.yaml"]) == 0
    return json.loads((root / "reports/report/metrics.json").read_text(encoding="utf-8"))


def test_report_from_every_input(tmp_path, monkeypatch):
    write_params(tmp_path)
    write_all_inputs(tmp_path)
    metrics = _run(tmp_path, monkeypatch)
    assert metrics["offline_default"] is True
    assert all(metrics["inputs"].values()) and len(metrics["inputs"]) == 9
    assert metrics["sections"] == ["Knowledge tagging", "Knowledge graph construction",
                                   "Tutoring dialogue generation (RAM2C)", "Tutoring dialogues (HTS)", "Tuned vs base",
                                   "Fine-tuning", "Report inputs"]  # fmt: skip
    stems = ["hts_scores", "kgc_f1_rounds", "tagging_prf1", "training_loss"]
    assert metrics["plots"] == sorted(f"{s}.{ext}" for s in stems for ext in ("csv", "png"))
    assert metrics["traces"] == {"tagging": {"samples": 3, "shown": 3}, "kgc": {"samples": 2, "shown": 2},
                                 "ram2c": {"samples": 1, "shown": 1}}  # fmt: skip

    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    lines = md.splitlines()
    expected = [
        # tagging Table 4: labels [1, 1, 0, 0]; team [1, 1, 1, 0], single LLM [1, failed -> wrong, 0, 0]
        "| Metric | Model size | Model | Embedding similarity (all-minilm-l6-v2) | Single LLM | Multi-agent team |",
        "| Accuracy | Base | smollm2-135m-instruct | 50.0 | **75.0** | **75.0** |",
        "| Precision | Base | smollm2-135m-instruct | 50.0 | **100.0** | 66.7 |",
        "| Recall | Base | smollm2-135m-instruct | 50.0 | 50.0 | **100.0** |",
        "| F1-score | Base | smollm2-135m-instruct | 50.0 | 66.7 | **80.0** |",
        "| Coverage | Base | smollm2-135m-instruct | 100.0 | 75.0 | 100.0 |",
        # CooperKGC Table 2: AutoKG, round 0 as the single-expert row, the team's gain over AutoKG in brackets
        "| Model | conllpp | nyt11_hrl | ace05 |",
        "| AutoKG (0-shot) | 50.0 | 0.0 | 10.0 |",
        "| Single expert (0-shot) | 50.0 | 25.0 | 20.0 |",
        "| CooperKGC (0-shot) | 75.0 (+25.0) | 25.0 (+25.0) | 40.0 (+30.0) |",
        "| CooperKGC (0-shot) · conllpp | 50.0 | 75.0 |",
        # RAM2C generation: 3 dialogues, one failed; group reflection per group
        "| 3 | 2 | 1 | 1 | too_long 1 | 19.0 | 1650 | 300 | 120 |",
        "| T | 4 | 2.00 | 1.50 | 75.0 | 75.0 | 5.0 | 450 |",
        # evaluate: HTS table, base vs tuned, deltas
        "| SmolLM2 DPO vs base | 74.8 (0.42) [66.0, 82.5] | 65.2 (0.45) [57.1, 73.0] | 73.3 (-) [65.0, 80.8] |",
        "| accuracy | 50.0 | 75.0 | +25.0 |",
        "| f1 | 20.0 | 30.0 | +10.0 |",
        "| tagging | team | accuracy | 62.5 | 70.8 | +8.3 | [-4.2, +20.8] | 24 |",
        # training from loss.csv, method from params
        "| sft | SFT LoRA | 3 | 2.400 | 1.800 |",
        "| dpo | DPO LoRA | 2 | 0.693 | 0.660 |",
        "| evaluate | reports/evaluate/metrics.json | found |",
    ]
    for row in expected:
        assert row in lines, row
    assert "Data: 4 evaluated pairs (evaluation split by row) of 108 labelled pairs" in md
    assert "nyt11_hrl (demo set, 1 sentences)" in md
    assert md.count("Offline default: small CPU models") >= 10
    page = (tmp_path / "reports/summary.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 4 and not re.search(r'(src|href)="(?!data:)', page)
    rows = (tmp_path / "reports/plots/kgc_f1_rounds.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "series,round,f1" and "CooperKGC (0-shot) · conllpp,1,0.75" in rows

    traces = (tmp_path / "reports/traces.html").read_text(encoding="utf-8")
    for team, sample in (("tagging", "q-wrong"), ("kgc", "sent-1"), ("ram2c", "topic-7")):
        assert f'data-team="{team}"' in traces and sample in traces
    assert "<script" in traces and 'src="' not in traces


def test_partial_inputs_are_notes(tmp_path, monkeypatch):
    write_params(tmp_path, default_llm={"kind": "openai", "model": "gpt-4o", "base_urls": ["http://x/v1"]})
    write_all_inputs(tmp_path)
    for name in ("reports/generate_tagging/metrics.json", "reports/generate_kgc/rounds.csv",
                 "reports/evaluate/metrics.json", "reports/train/dpo/loss.csv", "data/generated/kgc/traces.jsonl",
                 "data/generated/ram2c/traces.jsonl", "data/generated/tagging/traces.jsonl"):  # fmt: skip
        (tmp_path / name).unlink()
    (tmp_path / "reports/generate_ram2c/metrics.json").write_text("{not json", encoding="utf-8")
    metrics = _run(tmp_path, monkeypatch)
    assert metrics["offline_default"] is False  # generators on an API, no evaluate flag
    found = {k for k, v in metrics["inputs"].items() if v}
    assert found == {"kgc", "train.sft", "train.sft.loss", "train.dpo"}
    assert metrics["sections"] == ["Knowledge graph construction", "Fine-tuning", "Report inputs"]
    # rounds from the metrics' f1_per_round when rounds.csv is missing
    assert metrics["plots"] == ["kgc_f1_rounds.csv", "kgc_f1_rounds.png", "training_loss.csv", "training_loss.png"]
    assert metrics["traces"] == {} and len(metrics["traces_missing"]) == 3
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert "| tagging | reports/generate_tagging/metrics.json | missing: run `dvc repro generate_tagging` |" in md
    assert "| train.dpo.loss | reports/train/dpo/loss.csv | missing: run `dvc repro train@dpo` |" in md
    assert re.search(r"\| ram2c \| reports/generate_ram2c/metrics.json \| unreadable: JSONDecodeError", md)
    assert "| CooperKGC (0-shot) · conllpp | 50.0 | 75.0 |" in md  # rounds from f1_per_round
    assert "| dpo | DPO LoRA | 0 | - | - |" in md and "Offline default" not in md
    assert "No traces yet" in (tmp_path / "reports/traces.html").read_text(encoding="utf-8")


def test_a_shape_the_report_cannot_lay_out_is_a_note(tmp_path, monkeypatch):
    write_params(tmp_path)
    write_all_inputs(tmp_path)
    evaluate = evaluate_metrics()
    evaluate["tutoring"]["hts"] = {"tables": {"1": {"provenance": "x"}}}  # no rows
    (tmp_path / "reports/evaluate/metrics.json").write_text(json.dumps(evaluate), encoding="utf-8")
    metrics = _run(tmp_path, monkeypatch)
    assert metrics["inputs"]["evaluate"] is False and metrics["offline_default"] is True
    assert "Tutoring dialogues (HTS)" not in metrics["sections"] and "Tuned vs base" not in metrics["sections"]
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert "| evaluate | reports/evaluate/metrics.json | unreadable: KeyError: 'rows' |" in md


def test_nothing_ran_yet(tmp_path, monkeypatch):
    write_params(tmp_path)
    metrics = _run(tmp_path, monkeypatch)
    assert not any(metrics["inputs"].values()) and metrics["sections"] == ["Report inputs"]
    assert metrics["offline_default"] is True and metrics["plots"] == []


def test_offline_default_follows_the_backends():
    local = {"kind": "transformers", "model": "models/base/smollm2-135m-instruct"}
    params = {"tagging": {"llm": {"default": local}}, "kgc": {"llm": {"default": local}}}
    assert offline_default(params, ["tagging", "kgc", "ram2c"])
    params["kgc"]["llm"]["roles"] = {"ee_expert": {"kind": "openai", "model": "glm-4", "base_urls": ["http://x/v1"]}}
    assert not offline_default(params, ["tagging", "kgc"])
    assert offline_default(params, ["tagging"])
    moved = {"prepare_models": {"chat_model_dir": "models/other"}, "tagging": {"llm": {"default": local}}}
    assert not offline_default(moved, ["tagging"])
    assert not offline_default({}, ["tagging"])


def test_dvc_stage_reads_what_params_name():
    """The report stage is last, its deps cover the default inputs and traces, its outs the files."""
    dvc = yaml.safe_load((PROJECT / "dvc.yaml").read_text(encoding="utf-8"))
    assert list(dvc["stages"])[-1] == "report"
    report = dvc["stages"]["report"]
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    cfg = ReportConfig.model_validate(params["report"])
    assert cfg == ReportConfig()  # params.yaml spells out the defaults
    inputs = [cfg.inputs.tagging, cfg.inputs.kgc, cfg.inputs.kgc_rounds, cfg.inputs.ram2c, cfg.inputs.evaluate]
    inputs += [f"{folder}/{name}" for folder in cfg.inputs.train.values() for name in ("metrics.json", "loss.csv")]
    assert set(inputs) | set(cfg.traces.values()) <= set(report["deps"])
    outs = [next(iter(o)) if isinstance(o, dict) else o for o in report["outs"]]
    assert outs == ["reports/summary.md", "reports/summary.html", "reports/traces.html", "reports/plots"]
    assert [next(iter(m)) for m in report["metrics"]] == [cfg.outputs.metrics]
    plotted = {next(iter(p)) for p in dvc["plots"]}
    names = ("tagging_prf1", "kgc_f1_rounds", "hts_scores", "training_loss")
    assert plotted == {f"reports/plots/{n}.csv" for n in names}
