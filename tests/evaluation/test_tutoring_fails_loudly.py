"""Stage ``evaluate`` (tutoring only, scripted models) fails loudly: a judge server that is down
stops it at preflight with exit 1 naming the URL, before any reply is generated; judges whose
verdicts never parse, or a responder that never answers, exceed ``max_failed_share`` and stop it
with exit 1 naming the failures file; nothing is written as a result."""

from __future__ import annotations

import socket

import pytest

from stages.evaluate import main
from tests.evaluation.evaluate_fixtures import BASE, jsonl, write_dpo_data, write_project


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens on it once the socket is closed


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EDUMAS_TRACKING", "0")
    write_dpo_data(tmp_path)
    return tmp_path


def stage(root, tutoring: dict, capsys) -> tuple[int, str]:
    params = write_project(root, {"evaluate": {"systems": ["tutoring"], "tutoring": {"items": 3, **tutoring}}})
    code = main(["--params", str(params)])
    return code, capsys.readouterr().err


def test_a_down_judge_stops_the_stage_at_preflight(project, capsys):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    judge = {
        "default": {
            "kind": "openai",
            "model": "judge-model",
            "base_urls": [url],
            "api_key_env": None,
            "timeout_s": 5,
            "max_retries": 0,
        }
    }
    code, err = stage(project, {"judge_llm": judge}, capsys)
    assert code == 1 and "error:" in err and url in err
    assert not (project / "reports/evaluate/metrics.json").exists()
    assert not (project / "data/evaluate/tutoring/replies").exists()  # stopped before the first reply


def test_judges_that_never_give_a_verdict_exceed_the_budget(project, capsys):
    base = jsonl(project / "mute.jsonl", [{"match": "Dimension to judge", "reply": "I cannot tell."}, *BASE[1:]])
    llm = {"default": {"kind": "scripted", "replies": str(base)}, "cache": None}
    params = write_project(
        project, {"ram2c": {"llm": llm}, "evaluate": {"systems": ["tutoring"], "tutoring": {"items": 3}}}
    )
    code = main(["--params", str(params)])
    err = capsys.readouterr().err
    failures = "data/evaluate/tutoring/comparisons/tuned_vs_base/failures.json"
    assert code == 1 and "18 of 18 judgments unscored" in err and f"summary in {failures}" in err
    assert (
        '"unscored": 18' in (project / failures).read_text()
        and not (project / "reports/evaluate/metrics.json").exists()
    )


def test_a_responder_that_never_answers_exceeds_the_budget(project, capsys):
    silent = jsonl(project / "silent.jsonl", [{"match": "nothing matches this", "reply": "x"}])
    tuned = {"kind": "scripted", "model": "scripted-tuned", "replies": str(silent)}
    code, err = stage(project, {"tuned_backend": tuned}, capsys)
    failures = "data/evaluate/tutoring/replies/tuned/failures.json"
    assert code == 1 and "tutoring tuned: 3 of 3 samples failed" in err and f"summary in {failures}" in err
    assert "no rule matches" in (project / failures).read_text()
