"""Ablation tables from real `dvc exp show --json` output (dvc 3.67: a baseline and two experiments)."""

import json
from pathlib import Path

from pipelines.evaluation.ablation.tables import ablation_table, experiments, flatten, main, metric_value

SHOW = json.loads((Path(__file__).parents[1] / "fixtures" / "dvc_exp_show.json").read_text(encoding="utf-8"))


def test_experiments_are_flattened():
    exps = experiments(SHOW)
    assert [e["name"] for e in exps] == ["master", "one-expert", "no-p"]
    assert exps[0]["baseline"] and not exps[1]["baseline"]
    assert exps[2]["params"] == {"ram2c.groups": ["T", "E"], "ram2c.experts": 3}
    assert metric_value(exps[2], "hts.humanized.score") == 53
    assert metric_value(exps[2], "metrics.json:hts.humanized.score") == 53
    assert metric_value(exps[2], "nope") is None
    with_workspace = experiments(SHOW, include_workspace=True)
    assert with_workspace[0]["name"] == "workspace" and not with_workspace[0]["baseline"]
    assert flatten({"a": {"b": 1, "c": [1]}}) == {"a.b": 1, "a.c": [1]}


def test_ablation_table_with_changes_from_the_baseline(tmp_path):
    table = ablation_table(
        experiments(SHOW), params=["ram2c.groups", "ram2c.experts"], metrics=[("H", "hts.humanized.score")]
    )
    assert table.columns == ["Experiment", "ram2c.groups", "ram2c.experts", "H"]
    assert table.rows == [
        ["master (baseline)", '["T", "P", "E"]', "3", "58"],
        ["one-expert", '["T", "E"]', "1", "51 (-7.00)"],
        ["no-p", '["T", "E"]', "3", "53 (-5.00)"],
    ]
    path = tmp_path / "show.json"
    path.write_text(json.dumps(SHOW), encoding="utf-8")
    out = tmp_path / "a.md"
    assert main([str(path), "--param", "ram2c.experts", "--metric", "H=hts.humanized.score", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "| no-p | 3 | 53 (-5.00) |" in text
    assert text.rstrip().endswith("*Params and metrics of each experiment, from dvc exp show --json.*")
