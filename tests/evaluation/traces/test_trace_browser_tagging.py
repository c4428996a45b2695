"""The trace browser on real tagging traces: the tagging stage run on the regression scenario's
scripted replies, its traces.jsonl turned into the page; every sample's outcome agrees with the
predictions file."""

import json
from pathlib import Path

from pipelines.evaluation.traces.browser import group_samples, read_trace_rows, write_trace_browser
from pipelines.evaluation.traces.story import sample_outcome
from pipelines.llm.client import LLMRuntime, backend_key
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from tests.tagging.regression.scenario import backend, config_data


def test_tagging_traces_in_the_browser(tmp_path: Path):
    data = config_data(tmp_path)
    data["systems"] = ["team"]
    cfg = TaggingConfig.model_validate(data)
    runtime = LLMRuntime(cfg.llm, backends={backend_key(cfg.llm.default): backend()})
    generate_tagging(cfg, root=tmp_path, runtime=runtime)
    traces = tmp_path / "generated" / "traces.jsonl"
    lines = (tmp_path / "generated" / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    predictions = [json.loads(x) for x in lines]

    rows, bad = read_trace_rows(traces)
    samples = group_samples(rows)
    # every evaluated and generation pair of the scenario has a story
    assert bad == 0 and len(samples) == len(predictions) > 10
    for p in predictions:
        verdict = p["predictions"]["team"]
        expected = "failed" if verdict is None else "correct" if bool(verdict) == bool(p["label"]) else "wrong"
        assert sample_outcome(samples[p["id"]]) == expected, p["id"]

    stats = write_trace_browser(tmp_path / "traces.html", {"tagging": traces}, limit=10, seed=0)
    assert stats["tagging"]["samples"] == len(predictions)
    assert stats["tagging"]["shown"] == 10 and stats["tagging"]["sampled"]
    page = (tmp_path / "traces.html").read_text(encoding="utf-8")
    assert page.count("<article ") == 10 and "<h4>Program</h4>" in page and "print(first &lt; 60)" in page
