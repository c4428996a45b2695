"""The real adapter path: a tiny random Qwen2 as the base model and a LoRA adapter saved with peft
as ``models/dpo/final``; the tutoring system of the evaluate stage loads it on the transformers
backend (merged), answers the held-out prompts with both arms and judges them (json mode, verdicts
alone as in the offline default)."""

from __future__ import annotations

import json

import pytest

from pipelines.io import read_jsonl
from stages.evaluate import main
from tests.evaluation.evaluate_fixtures import write_dpo_data
from tests.tiny_models import tiny_qwen2

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]


def save_adapter(base_dir, adapter_dir) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base_dir))
    torch.manual_seed(1)  # init_lora_weights=False: random A and B, so the adapter changes the replies
    config = LoraConfig(r=8, lora_alpha=32, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(str(adapter_dir))


def test_tutoring_runs_the_dpo_adapter_against_its_base(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EDUMAS_TRACKING", "0")
    tiny_qwen2(tmp_path / "models/base/tiny-qwen2", init_std=0.3)
    write_dpo_data(tmp_path, train=3, evaluation=1, extra=1)
    params = tmp_path / "params.yaml"
    backend = "{kind: transformers, model: models/base/tiny-qwen2, batch_wait_ms: 0}"
    params.write_text(
        "ram2c:\n  output_mode: text\n  progress: false\n  max_tokens: {drafter: 12}\n"
        f"  llm: {{default: {backend}, cache: cache/llm.sqlite, sampling: {{max_tokens: 12}}}}\n"
        "evaluate:\n  systems: [tutoring]\n  progress: false\n  bootstrap: {resamples: 50}\n"
        "  tutoring: {items: 2, hts: {mode: json, reasoning: false, resamples: 50, dimensions: [safety], judges: ["
        "{name: s1, seed: 1, temperature: 0.7, max_tokens: 16},"
        " {name: s2, seed: 2, temperature: 0.7, max_tokens: 16}]}}\n"
    )
    assert main(["--params", str(params)]) == 1  # no adapter yet: the train stage is named
    save_adapter(tmp_path / "models/base/tiny-qwen2", tmp_path / "models/dpo/final")
    assert main(["--params", str(params)]) == 0
    metrics = json.loads((tmp_path / "reports/evaluate/metrics.json").read_text())
    assert metrics["offline_default"] is True and metrics["systems"] == ["tutoring"]
    assert set(metrics) >= {"tutoring", "deltas", "deltas_provenance"} and "tagging" not in metrics
    base, tuned = (
        read_jsonl(tmp_path / f"data/evaluate/tutoring/replies/{arm}/traces.jsonl") for arm in ("base", "tuned")
    )
    assert len(base) == len(tuned) == metrics["tutoring"]["prompts"]["evaluated"] == 2
    assert [t["reply"] for t in base] != [t["reply"] for t in tuned]  # the merged adapter changes the model
    judgments = read_jsonl(tmp_path / "data/evaluate/tutoring/comparisons/tuned_vs_base/judgments.jsonl")
    assert len(judgments) == metrics["tutoring"]["n"] * 2 and {j["dimension"] for j in judgments} == {"safety"}
    table = metrics["tutoring"]["hts"]["tables"]["1"]
    assert list(table["rows"]) == ["tiny-qwen2 + models/dpo/final vs tiny-qwen2"]
    scored = [j for j in judgments if j["outcome"] is not None]
    assert len(scored) == len(judgments)  # constrained to {"verdict"}, even a random model gives verdicts
    for row in metrics["deltas"]:
        dimension = row["metric"].removeprefix("hts_")
        mine = [j for j in scored if j["dimension"] == dimension]
        points = {"better": 4, "equal": 2, "worse": 0}
        assert table["rows"][list(table["rows"])[0]][dimension]["score"] == pytest.approx(
            100 * sum(points[j["outcome"]] for j in mine) / (4 * len(mine))
        )
