"""A 5-sentence run of the stage (English demo set, 1 round) with the offline default model
(SmolLM2-135M, json mode) completes and writes every output; a 135M model rarely gives usable
extractions, so only the run is checked. About 3 CPU-minutes (10 min wall at load average 8)."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from stages.generate_kgc import main
from tests.tiny_models import smollm2_dir

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data/kgc"


@pytest.mark.slow
def test_five_sentences_with_the_offline_model(tmp_path, monkeypatch):
    model = smollm2_dir()
    params = tmp_path / "params.yaml"
    params.write_text(
        textwrap.dedent(f"""\
        kgc:
          datasets:
            - {{name: conllpp, format: conll, files: [{DEMO / "ner_en.conll"}], sample: 2}}
            - {{name: nyt11_hrl, format: nyt11_hrl, files: [{DEMO / "re_en.nyt.jsonl"}], sample: 2}}
            - {{name: ace05, format: ace05, files: [{DEMO / "ee_en.oneie.jsonl"}], sample: 1}}
          systems: [cooperkgc]
          output_mode: json
          concurrency: 16
          max_failed_share: 1.0
          progress: false
          llm:
            default: {{kind: transformers, model: {model}, max_batch_size: 16}}
            cache: null
            sampling: {{temperature: 0.0, max_tokens: 32}}
          team: {{rounds: 1, max_attempts: 1}}
        """)
    )
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    assert main(["--params", str(params)]) == 0
    metrics = json.loads((tmp_path / "reports/generate_kgc/metrics.json").read_text())
    assert metrics["n_evaluated"] == 5 and metrics["failed_samples"] == 0
    team = metrics["systems"]["cooperkgc@0shot"]
    assert set(team["datasets"]) == {"conllpp", "nyt11_hrl", "ace05"}
    assert all(len(d["f1_per_round"]) == 2 for d in team["datasets"].values())
    traces = (tmp_path / "data/generated/kgc/traces.jsonl").read_text().splitlines()
    assert sum(1 for t in traces if json.loads(t).get("mode") == "json") == 5 * 3 * 2
    assert (tmp_path / "reports/generate_kgc/table.md").exists() and (
        tmp_path / "data/generated/kgc/sft.jsonl"
    ).exists()
    print(f"5 sentences x 3 experts x 2 rounds on SmolLM2: {time.perf_counter() - start:.1f} s")
