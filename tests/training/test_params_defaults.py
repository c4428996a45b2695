"""The ``train:`` sections of params.yaml as shipped: switching ``model`` alone to a ChatGLM3 or MiniCPM folder
needs no other key (attention comes from the family), and the default DPO schedule really trains: step 1 runs
at the peak learning rate and the losses logged after the updates differ from ln 2; ``metrics.json`` carries
the whole loss curve, the row counts and the LM-head probe record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from pipelines.training.config import TrainConfig
from pipelines.training.families import attention_implementation, detect_family, read_model_type

ROOT = Path(__file__).resolve().parents[2]


def params_train(method: str) -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["train"][method]


@pytest.mark.parametrize("method", ["sft", "dpo"])
@pytest.mark.parametrize("family", ["chatglm3", "minicpm", "qwen2"])
def test_switching_the_model_alone_picks_the_familys_attention(family_models, family, method):
    cfg = TrainConfig.model_validate(params_train(method) | {"model": str(family_models[family])})
    chosen = detect_family(read_model_type(cfg.model), cfg.family)
    assert chosen.name == family
    assert attention_implementation(cfg.attn_implementation, chosen) == (None if family != "qwen2" else "sdpa")


@pytest.mark.slow
def test_the_default_dpo_schedule_trains_and_metrics_carry_the_curve(tiny_model, tiny_data, tmp_path):
    from pipelines.training.run import run_training
    from pipelines.training.summary import read_loss_csv
    from tests.training.conftest import train_config

    schedule = params_train("dpo")["schedule"]
    cfg = train_config(tiny_model, tiny_data, tmp_path / "run", "dpo", schedule=schedule)
    metrics = run_training(cfg)
    curve = metrics["loss_curve"]
    assert [step for step, _ in curve] == list(range(1, schedule["max_steps"] + 1))
    assert curve == read_loss_csv(cfg.reports_path / "loss.csv")
    assert abs(curve[0][1] - math.log(2)) < 1e-4  # before any update: the policy is the reference
    after = [loss for step, loss in curve if step > 1]  # logged after 1 and 2 real updates
    assert len(after) >= 2 and all(abs(loss - math.log(2)) > 1e-6 for loss in after), curve
    assert (metrics["first_logged_loss"], metrics["last_logged_loss"]) == (curve[0][1], curve[-1][1])
    assert metrics["train_rows"] == 3 and metrics["eval_rows"] == 0  # the tiny data keeps every row in train
    assert metrics["lm_head"]["passed"] and metrics["lm_head"]["rows"] == 3
    summary = json.loads((cfg.final_dir / "training_summary.json").read_text())
    assert summary["metrics"]["loss_curve"] == curve
