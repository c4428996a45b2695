"""The human rating pack is written by the default run (params.yaml sets evaluate.tutoring.human,
dvc.yaml declares its folder) and the report links its form (on the recorded smoke run)."""

import json
import re

import yaml

from pipelines.evaluation.arms.config import EvaluateConfig
from tests.evaluation.recorded import metrics
from tests.evaluation.report.test_report_stage import PROJECT, _project, _run


def test_the_default_run_writes_the_pack():
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    human = EvaluateConfig.model_validate(params["evaluate"]).tutoring.human
    assert human is not None and len(human.raters) == 3 and human.folder == "reports/evaluate/human"
    dvc = yaml.safe_load((PROJECT / "dvc.yaml").read_text(encoding="utf-8"))
    assert human.folder in dvc["stages"]["evaluate"]["outs"]


def test_the_report_links_the_pack(tmp_path, monkeypatch):
    _project(tmp_path)
    evaluate = metrics("evaluate")
    evaluate["tutoring"]["human"] = {  # what write_human_pack records
        "folder": "reports/evaluate/human",
        "raters": ["rater_1", "rater_2", "rater_3"],
        "rows_per_rater": {"rater_1": 6, "rater_2": 6, "rater_3": 6},
        "import": "python -m pipelines.evaluation.human.pack <filled CSVs> --pack reports/evaluate/human",
    }
    (tmp_path / "reports/evaluate/metrics.json").write_text(json.dumps(evaluate), encoding="utf-8")
    found = _run(tmp_path, monkeypatch)
    assert found["human_pack"] == "evaluate/human/form.html"
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert ("Human rating pack: [evaluate/human/form.html](evaluate/human/form.html) (blind sheets for 3 raters "
            "(rater_1, rater_2, rater_3), 6 rows each, identical replies filled in as equal; import the filled "
            "sheets: python -m pipelines.evaluation.human.pack <filled CSVs> --pack reports/evaluate/human).") in md
    page = (tmp_path / "reports/summary.html").read_text(encoding="utf-8")
    assert re.findall(r'(?:src|href)="(?!data:)([^"]*)"', page) == ["traces.html", "evaluate/human/form.html"]
