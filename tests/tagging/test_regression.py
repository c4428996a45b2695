"""Tagging in ``text`` mode on scripted replies gives exactly the predictions, metrics and SFT
rows that the code gave before the generation harness (``regression/expected.json``, recorded by
``regression/record.py`` from that code). Metrics keys added since are allowed; every recorded
value must be equal (floats to 1e-12: scikit-learn computes F1 as 2tp / (2tp + fp + fn), which can
differ from the old 2pr / (p + r) in the last bit)."""

import json
from pathlib import Path

import pytest

from pipelines.llm.client import LLMRuntime
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from tests.tagging.regression.scenario import EXPECTED, backend, config_data, read_outputs


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
    runtime = LLMRuntime(cfg.llm, backends={cfg.llm.default.model_dump_json(): backend()})
    closed = []

    async def close():
        closed.append(True)

    runtime.close = close
    metrics = generate_tagging(cfg, root=tmp_path, runtime=runtime)
    assert closed == []  # a runtime passed in is left open
    outputs = read_outputs(tmp_path)
    assert outputs["predictions"] == expected["predictions"]
    assert outputs["sft"] == expected["sft"]
    assert_recorded_values_equal(expected["metrics"], metrics)
    assert expected["metrics"]["sft_rows"] == 9 and expected["metrics"]["systems"]["team"]["failed_subtasks"] == 4
