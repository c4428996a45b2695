"""A 3-sentence run of the stage (English demo set, one sentence of each task, 1 round) with the offline default model
(SmolLM2-135M, json mode with the default bounds, grounded spans and max_tokens) completes, every
reply parses, every span is in its sentence and every output is written; a 135M model rarely gives
correct extractions, so scores are not checked. About 2 CPU-minutes."""

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
def test_three_sentences_with_the_offline_model(tmp_path, monkeypatch):
    model = smollm2_dir()
    params = tmp_path / "params.yaml"
    params.write_text(
        textwrap.dedent(f"""\
        kgc:
          datasets:
            - {{name: conllpp, format: conll, files: [{DEMO / "ner_en.conll"}], sample: 1}}
            - {{name: nyt11_hrl, format: nyt11_hrl, files: [{DEMO / "re_en.nyt.jsonl"}], sample: 1}}
            - {{name: ace05, format: ace05, files: [{DEMO / "ee_en.oneie.jsonl"}], sample: 1}}
          systems: [cooperkgc]
          output_mode: json
          concurrency: 16
          max_failed_share: 1.0
          progress: false
          llm:
            default: {{kind: transformers, model: {model}, max_batch_size: 16}}
            cache: null
            sampling: {{temperature: 0.0, max_tokens: 192}}
          team:
            rounds: 1
            max_attempts: 1
            bounds: {{en: {{items: 2, arguments: 1, span_chars: 20, reason_chars: 40}}}}
          sft: {{keep: answer}}
        """)
    )
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    assert main(["--params", str(params)]) == 0
    metrics = json.loads((tmp_path / "reports/generate_kgc/metrics.json").read_text())
    assert metrics["n_evaluated"] == 3 and metrics["failed_samples"] == 0
    team = metrics["systems"]["cooperkgc@0shot"]
    assert set(team["datasets"]) == {"conllpp", "nyt11_hrl", "ace05"}
    assert all(len(d["f1_per_round"]) == 2 for d in team["datasets"].values())
    replies = team["unparseable"]  # per role: {"replies", "unparseable"}; bounded schemas close within max_tokens
    assert {role: r["unparseable"] for role, r in replies.items()} == dict.fromkeys(replies, 0), replies
    assert sum(r["replies"] for r in replies.values()) == 3 * 3 * 2
    traces = [json.loads(t) for t in (tmp_path / "data/generated/kgc/traces.jsonl").read_text().splitlines()]
    expert_calls = [t for t in traces if t.get("mode") == "json"]
    assert len(expert_calls) == 3 * 3 * 2
    assert sum(t.get("ungrounded") or 0 for t in expert_calls) == 0  # kgc.spans: sentence
    sft = (tmp_path / "data/generated/kgc/sft.jsonl").read_text().splitlines()
    assert metrics["sft_rows"] == len(sft) >= 1  # keep: answer: a row per sentence with a non-empty answer
    assert (tmp_path / "reports/generate_kgc/table.md").exists()
    print(f"3 sentences x 3 experts x 2 rounds on SmolLM2: {time.perf_counter() - start:.1f} s")
