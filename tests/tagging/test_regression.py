"""Tagging in ``text`` mode on scripted replies gives exactly the recorded predictions, metrics and
SFT rows (``regression/expected.json``, recorded by ``regression/record.py``). First recorded from
the code before the generation harness (commit 7f5e3fd) and checked equal after the move; then
re-recorded once for issue 11, which changes the outputs on purpose: a generation / evaluation
split (SFT rows from the generation split only), failed samples as their own outcome with a
coverage column, demonstrations from the generation split; and once for issue 21 (the split by
question text moves whole groups, the semantic judge sees a positive and a negative example, the
numerical agents see the definition). Metrics keys added since are allowed; every recorded
value must be equal (floats to 1e-12: scikit-learn computes F1 as 2tp / (2tp + fp + fn), which can
differ from the old 2pr / (p + r) in the last bit)."""

import json
from pathlib import Path

import pytest

from pipelines.llm.client import LLMRuntime, backend_key
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from tests.tagging.regression.scenario import EXPECTED, backend, config_data, portable, read_outputs


def assert_recorded_values_equal(expected, actual, path="metrics"):
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} is missing"
            assert_recorded_values_equal(value, actual[key], f"{path}.{key}")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-12, abs=1e-15), path
    else:
        assert actual == expected, path


def test_text_mode_outputs_equal_the_recorded_ones(tmp_path: Path):
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    cfg = TaggingConfig.model_validate(config_data(tmp_path))
    runtime = LLMRuntime(cfg.llm, backends={backend_key(cfg.llm.default): backend()})
    closed = []

    async def close():
        closed.append(True)

    runtime.close = close
    metrics = generate_tagging(cfg, root=tmp_path, runtime=runtime)
    assert closed == []  # a runtime passed in is left open
    outputs, metrics = portable(read_outputs(tmp_path)), portable(metrics)
    assert outputs["predictions"] == expected["predictions"]
    assert outputs["sft"] == expected["sft"]
    assert_recorded_values_equal(expected["metrics"], metrics)
    assert expected["metrics"]["sft_rows"] == 18 and expected["metrics"]["systems"]["team"]["failed_subtasks"] == 7
    single = expected["metrics"]["systems"]["single_llm"]["overall"]
    assert single["coverage"] == 20 / 24 and single["failure_outcome"] == "wrong"  # 4 unparsed of 24, scored wrong
    assert all(p["split"] in ("evaluation", "generation") for p in expected["predictions"])
