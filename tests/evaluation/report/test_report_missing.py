"""What the default run does not show is said: RAM2C Tables 2 and 3 absent from the evaluate metrics
and from the ablation set are rows of a "Missing comparisons" table with the command that makes
them, an ablations file with no experiment is not "found", and the evaluate stage's shortfalls
name tutoring prompts evaluated vs requested (on the recorded smoke run)."""

import json
import shutil

import yaml

from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.report.missing import TABLE_2_COMMAND, TABLE_3_COMMAND
from stages.evaluate import shortfalls as evaluate_shortfalls
from tests.evaluation.recorded import metrics
from tests.evaluation.recorded import traces as recorded_traces
from tests.evaluation.report.test_report_stage import PROJECT, _project, _run


def test_tables_2_and_3_missing_are_said_with_their_commands(tmp_path, monkeypatch):
    params = _project(tmp_path)
    params["evaluate"]["tutoring"]["comparisons"] = {"table_1": [["tuned", "base"]], "table_2": [], "table_3": []}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    evaluate = metrics("evaluate")
    tables = evaluate["tutoring"]["hts"]["tables"]
    evaluate["tutoring"]["hts"]["tables"] = {"1": tables["1"]}  # the default run's Table 1 only
    (tmp_path / "reports/evaluate/metrics.json").write_text(json.dumps(evaluate), encoding="utf-8")
    (tmp_path / "reports/ablations.json").write_text('{"experiments": [], "tables": []}', encoding="utf-8")
    found = _run(tmp_path, monkeypatch)
    assert found["missing"] == ["RAM2C Table 2", "RAM2C Table 3"]
    assert found["inputs"]["ablations"] is False and "Missing comparisons" in found["sections"]
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert f"| {TABLE_2_COMMAND} |" in md and f"| {TABLE_3_COMMAND} |" in md
    assert "evaluate.tutoring.comparisons.table_2 is empty in params.yaml" in md
    fix = "python -m pipelines.evaluation.ablation.experiments all"
    assert f"| ablations | reports/ablations.json | empty: no experiment recorded; run `{fix}` |" in md


def test_recorded_tables_2_and_3_are_not_missing(tmp_path, monkeypatch):
    _project(tmp_path)  # the smoke profile's evaluate judged Tables 1-3
    (tmp_path / "data/tagging").mkdir(parents=True)
    shutil.copy(PROJECT / "data/tagging/demo.jsonl", tmp_path / "data/tagging/demo.jsonl")
    found = _run(tmp_path, monkeypatch)
    assert found["missing"] == [] and "Missing comparisons" not in found["sections"]
    traces = (tmp_path / "reports/traces.html").read_text(encoding="utf-8")  # the pairs' texts from the data
    assert traces.count("<b>Question</b>: ") == traces.count("<b>Definition</b>: ") == 4
    assert traces.count("<b>Student persona</b> s") == len({r["sample_id"] for r in recorded_traces("ram2c")})


def test_evaluate_shortfalls_count_tutoring_prompts():
    recorded = metrics("evaluate")
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    cfg = EvaluateConfig.model_validate(params["evaluate"])
    recorded["tutoring"]["prompts"].update(requested=8, evaluated=7)
    recorded["tutoring"]["failed_replies"]["base"] = 2
    lines = [s.line() for s in evaluate_shortfalls(cfg, recorded) if s is not None]
    assert "7 of 8 tutoring held-out prompts (prompts outside the DPO train split)" in lines
    assert "5 of 7 tutoring replies of the base model (did not parse)" in lines
