"""make_datasets builds each dataset for the run it feeds: the model, family and max_length of its train
section; the one-tokenizer keys are refused with the fix; a preset laid over params replaces a run whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipelines.config import ConfigError, validate_section
from pipelines.training.dataset_builder import MakeDatasetsConfig, build_datasets
from pipelines.training.dataset_targets import model_targets, targets_from_params
from tests.training.conftest import DPO_ROWS, SFT_ROWS, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


def test_the_one_tokenizer_keys_are_refused_with_the_train_key_that_replaced_them():
    with pytest.raises(ConfigError) as caught:
        validate_section({"inputs": [{"path": "x", "kind": "sft"}], "tokenizer": "models/base/x", "max_length": 512},
                         MakeDatasetsConfig, section="make_datasets")  # fmt: skip
    message = str(caught.value)
    assert "make_datasets.tokenizer -> train.<method>.model" in message
    assert "make_datasets.max_length -> train.<method>.max_length" in message and "family ->" not in message


def _params(tmp_path: Path, **sections) -> Path:
    base = {"method": "sft", "model": "models/base/a"}
    train = {"sft": base, "dpo": {"method": "dpo", "model": "models/base/b", "max_length": 300}} | sections
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"train": train}), encoding="utf-8")
    return path


def test_targets_come_from_the_train_sections(tmp_path):
    targets = targets_from_params({"sft": "train.sft", "dpo": "train.dpo"}, _params(tmp_path), output_dir="data/train")
    assert (targets["sft"].tokenizer, targets["sft"].max_length, targets["sft"].section) == (
        "models/base/a", 1024, "train.sft")
    assert (targets["dpo"].tokenizer, targets["dpo"].max_length, targets["dpo"].section) == (
        "models/base/b", 300, "train.dpo")


@pytest.mark.parametrize(
    ("sft", "expected"),
    [
        ({"method": "dpo", "model": "m"}, "a dpo run; the sft dataset feeds a sft run"),
        ({"method": "sft", "model": "m", "dataset": "data/other/sft"}, "set train.sft.dataset: data/train/sft"),
        ({"method": "sft", "model": "m", "data_card": "x.json"}, "set train.sft.data_card: data/train/data_card.json"),
    ],
)
def test_a_section_that_does_not_read_this_dataset_is_refused(tmp_path, sft, expected):
    params = _params(tmp_path, sft=sft)
    with pytest.raises(ConfigError, match=expected):
        targets_from_params({"sft": "train.sft", "dpo": "train.dpo"}, params, output_dir="data/train")


def test_each_dataset_is_measured_with_its_own_runs_tokenizer(tmp_path, tiny_model, minicpm_model):
    """SFT for the MiniCPM stand-in, DPO for the Qwen2 one: each card entry names its model and fingerprint,
    and train accepts only its own dataset."""
    from pipelines.models.chat_encoding import tokenizer_fingerprint
    from pipelines.training.dataset_builder import load_tokenizer
    from pipelines.training.loading import TrainingSetupError, check_dataset_tokenizer
    from tests.training.conftest import train_config

    cfg = MakeDatasetsConfig(
        inputs=[{"path": str(write_jsonl(tmp_path / "in/sft.jsonl", SFT_ROWS)), "kind": "sft"},
                {"path": str(write_jsonl(tmp_path / "in/dpo.jsonl", DPO_ROWS)), "kind": "dpo"}],
        output_dir=str(tmp_path / "train"), eval_fraction=0.0, reports_dir=str(tmp_path / "reports"),
    )  # fmt: skip
    targets = model_targets(str(minicpm_model), kinds=("sft",), max_length=200) | model_targets(
        str(tiny_model), kinds=("dpo",), max_length=100)
    build_datasets(cfg, targets)
    card = json.loads((tmp_path / "train/data_card.json").read_text())
    minicpm, _ = load_tokenizer(str(minicpm_model))
    qwen, _ = load_tokenizer(str(tiny_model))
    assert card["targets"]["sft"] == {"section": None, "tokenizer": str(minicpm_model), "family": "minicpm",
                                      "max_length": 200, "tokenizer_sha256": tokenizer_fingerprint(minicpm)}
    assert card["targets"]["dpo"] == {"section": None, "tokenizer": str(tiny_model), "family": "qwen2",
                                      "max_length": 100, "tokenizer_sha256": tokenizer_fingerprint(qwen)}
    assert card["counts"]["sft"]["train"] == 3 and card["counts"]["dpo"]["train"] == 3
    card_path = str(tmp_path / "train/data_card.json")
    dpo_run = train_config(tiny_model, tmp_path / "train", tmp_path / "run", "dpo", data_card=card_path)
    check_dataset_tokenizer(dpo_run, qwen)  # its own: accepted
    sft_on_qwen = train_config(tiny_model, tmp_path / "train", tmp_path / "run", "sft", data_card=card_path)
    with pytest.raises(TrainingSetupError, match="length-filtered with the tokenizer of .*minicpm"):
        check_dataset_tokenizer(sft_on_qwen, qwen)


def test_a_preset_replaces_its_run_whole_in_params_and_in_dvc_flags():
    from pipelines.profiles import apply_profile, combine_profiles, load_profile, set_flags

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    preset = load_profile(str(ROOT / "configs/training/ram2c_dpo_minicpm-2b.yaml"))
    merged = apply_profile(params, combine_profiles([preset, load_profile("smoke", root=ROOT)]))
    dpo = merged["train"]["dpo"]
    assert dpo["model"] == "models/base/MiniCPM-2B-sft-bf16" and dpo["output_dir"] == "models/dpo"
    assert dpo["schedule"]["max_steps"] == 3 and "warmup_ratio" in dpo["schedule"]
    assert "lm_head" not in dpo and merged["train"]["sft"] == apply_profile(
        params, load_profile("smoke", root=ROOT))["train"]["sft"]
    flags = set_flags(preset, params)
    assert flags[0] == "~train.dpo" and flags[1].startswith("+train.dpo={method: dpo, model: models/base/MiniCPM")
