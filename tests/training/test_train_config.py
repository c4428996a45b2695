"""Training config: strict keys, cross-field rules, presets, tracking names, no secrets logged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.config import ConfigError, load_section, validate_section
from pipelines.training.config import TrainConfig, tracking_names
from pipelines.training.families import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
BASE = {"method": "dpo", "model": "models/base/x", "dataset": "data/train/dpo", "output_dir": "models/dpo"}


def test_unknown_key_names_the_key_and_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"train\.dpo\.betta: unknown key.*beta"):
        validate_section(BASE | {"dpo": {"betta": 0.2}}, TrainConfig, section="train")


def test_unknown_key_in_a_params_file_names_its_line(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"train": {"dpo": BASE | {"learning_rat": 1.0}}}, sort_keys=False))
    with pytest.raises(ConfigError, match=r"params.yaml:\d+: train\.dpo\.learning_rat: unknown key"):
        load_section("train.dpo", TrainConfig, params)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"dpo": {"reference_model": "models/ref"}}, "reference is the base model with the adapter disabled"),
        ({"tuning": "full", "merge": True}, "merge: true needs tuning lora or qlora"),
        ({"sft": {"packing": True}}, "packing applies to method sft only"),
        ({"method": "ppo"}, "method"),
        ({"dpo": {"loss_type": "magic"}}, "loss_type"),
    ],
)
def test_inconsistent_settings_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate_section(BASE | overrides, TrainConfig, section="train")


def test_full_dpo_accepts_an_explicit_reference():
    cfg = TrainConfig.model_validate(BASE | {"tuning": "full", "dpo": {"reference_model": "models/ref"}})
    assert cfg.dpo.reference_model == "models/ref" and cfg.checkpoints_dir == Path("models/dpo/checkpoints")


@pytest.mark.parametrize("preset", sorted((ROOT / "configs" / "training").glob("*.yaml")), ids=lambda p: p.stem)
def test_presets_are_valid(preset):
    cfg = load_section("train", TrainConfig, preset)
    assert cfg.family in FAMILIES
    assert "expected peak GPU memory" in preset.read_text()


def test_tracking_names_from_params_and_dvc_experiment():
    cfg = TrainConfig.model_validate(BASE)
    assert tracking_names(cfg, {}) == {"project": "edumas", "group": None, "name": "dpo-lora-x"}
    named = cfg.model_copy(update={"tracking": cfg.tracking.model_copy(update={"group": "g", "run_name": "r"})})
    assert tracking_names(named, {"DVC_EXP_NAME": "exp1"}) == {"project": "edumas", "group": "g", "name": "r-exp1"}
    assert tracking_names(cfg, {"DVC_EXP_NAME": "exp1"})["group"] == "exp1"


def test_no_secret_reaches_the_logged_training_arguments(monkeypatch, tmp_path):
    from pipelines.tracking import scrub
    from pipelines.training.run import trainer_args

    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("WANDB_API_KEY", secret)
    cfg = TrainConfig.model_validate(BASE | {"output_dir": str(tmp_path)})
    logged = str(trainer_args(cfg, report_to="none", run_name="r").to_dict()) + str(scrub(cfg.model_dump()))
    assert secret not in logged
