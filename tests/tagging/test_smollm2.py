"""Five questions through the team on the offline default model (SmolLM2-135M-Instruct, transformers), in
text mode. JSON mode (the default) on the same model is checked on the smoke run of ``tests/test_end_to_end.py``:
every reply parsed, every numerical check run in the sandbox."""

import json
from pathlib import Path

import pytest

from pipelines.config import validate_section
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from tests.tiny_models import smollm2_dir

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_five_questions_complete_on_the_default_model(tmp_path, one_torch_thread):
    cfg = validate_section(
        {
            "data": {
                "path": str(ROOT / "data/tagging/demo.jsonl"),
                "limit": 5,
                "languages": ["en"],
                "knowledge_ids": ["mul_2d_by_1d"],
            },
            "split": {"generation_limit": 0},  # evaluated pairs only: no SFT generation run
            "systems": ["team"],
            "output_mode": "text",
            "max_unparseable_share": 1.0,  # 16-token replies rarely parse: this test is the flow, not the replies
            "concurrency": 16,
            "progress": False,
            "llm": {
                "default": {"kind": "transformers", "model": str(smollm2_dir()), "max_batch_size": 16},
                "cache": None,
                "sampling": {"max_tokens": 16},
            },
            "team": {"max_attempts": 1, "max_constraints": 1, "semantic_demonstrations": False},
            "outputs": {"generated_dir": "gen", "reports_dir": "rep"},
        },
        TaggingConfig,
        section="tagging",
    )
    metrics = generate_tagging(cfg, root=tmp_path)
    team = metrics["systems"]["team"]
    assert metrics["n_evaluated"] == 5 and team["overall"]["n"] == 5
    assert team["llm_calls_per_question"] >= 2 and team["tokens_per_question"] > 0
    traces = [json.loads(line) for line in (tmp_path / "gen/traces.jsonl").read_text().splitlines()]
    assert len([t for t in traces if t["agent"] == "team"]) == 5
    solver = [t for t in traces if t["agent"] == "solver"]
    assert len(solver) == 5 and all(t["reply"] for t in solver)  # the model really answered
    assert (tmp_path / "rep/table.md").exists()
