"""The evaluate stage's traces in the trace browser, from a real run of the stage (tutoring on
scripted models, tests/evaluation/evaluate_fixtures.py): per comparison item both replies, every
judge's rendered prompt and verdict, and ties (a system whose replies equal the baseline's) shown
as equal without a judge call; the page driven in a headless browser."""

import json

import pytest

from pipelines.evaluation.report.build import write_traces
from pipelines.evaluation.report.config import ReportConfig
from pipelines.evaluation.traces.evaluate import TIE_STEP, evaluate_teams
from tests.evaluation.evaluate_fixtures import BASE_REPLY, TUNED_REPLY, run_tutoring_evaluate


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate_traces")
    scripted = {"kind": "scripted", "replies": str(root / "base.jsonl")}
    twin = {"name": "twin", "kind": "reference", "backend": scripted}  # the base model's replies again: ties
    return run_tutoring_evaluate(root, {"items": 3, "systems": [{"name": "base", "kind": "base"}, twin],
                                        "comparisons": {"table_1": [["tuned", "base"]],
                                                        "table_2": [["twin", "base"]]}})  # fmt: skip


def test_comparisons_are_teams_with_replies_prompts_verdicts_and_ties(evaluated):
    readme = evaluated / "reports/evaluate/human/README.md"  # no pack asked for: the DVC out still exists
    assert readme.read_text(encoding="utf-8").startswith("No human rating pack in this run")
    teams, records = evaluate_teams(evaluated / "data/evaluate")
    assert set(teams) == {"evaluate tuned_vs_base", "evaluate twin_vs_base"}
    judged = teams["evaluate tuned_vs_base"]
    assert len({r["sample_id"] for r in judged}) == 3 and all(isinstance(r.get("prompt"), list) for r in judged)
    for item, record in records["evaluate tuned_vs_base"].items():
        assert record["replies"] == {"tuned": TUNED_REPLY, "base": BASE_REPLY}
        assert len(record["judgments"]) == 2 * 3 and not any(j["tie"] for j in record["judgments"])
        assert record["prompt"]["id"] == item
    ties = teams["evaluate twin_vs_base"]
    assert [r["agent"] for r in ties] == ["tie"] * 3 and {r["note"] for r in ties} == {TIE_STEP}
    assert all(j["tie"] and j["choice"] == "equal" for rec in records["evaluate twin_vs_base"].values()
               for j in rec["judgments"])  # fmt: skip


def test_the_report_browser_shows_them(evaluated, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    stats = write_traces(ReportConfig(), {}, root=evaluated)
    assert {t: s["shown"] for t, s in stats["teams"].items()} == {"evaluate tuned_vs_base": 3,
                                                                   "evaluate twin_vs_base": 3}  # fmt: skip
    driver, _ = browser
    driver.get((evaluated / "reports/traces.html").as_uri())
    for team, expected in (("evaluate tuned_vs_base", "Verdict"), ("evaluate twin_vs_base", "tie: no judge call")):
        Select(driver.find_element(By.ID, "team")).select_by_value(team)
        item = next(li for li in driver.find_elements(By.CSS_SELECTOR, "#list li") if li.is_displayed())
        item.click()
        article = driver.find_element(By.ID, item.get_attribute("data-target"))
        text = article.text
        assert "both replies and the verdicts" in text and BASE_REPLY in text and expected in text, text[:2000]
    html = (evaluated / "reports/traces.html").read_text(encoding="utf-8")
    assert "Dimension to judge" in html  # the rendered judge prompt (the scripted judge matches on it)
    assert json.dumps(TIE_STEP)[1:-1] in html
