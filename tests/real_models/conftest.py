"""Checks against the real RAM2C base models; they run only where ``EDUMAS_MODELS_DIR`` names a folder
holding ``Qwen1.5-4B-Chat``, ``MiniCPM-2B-sft-bf16`` (or ``MiniCPM-2B-sft``) and ``chatglm3-6b``.

Tokenizer files (with the remote ``*.py`` files) are enough for the template and meta-device tests;
``pytest -m gpu tests/real_models`` also needs the weights and a CUDA GPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipelines.training.distributed import PROJECT_ROOT

# preset file -> candidate folder names under EDUMAS_MODELS_DIR
RAM2C_MODELS = {
    "ram2c_dpo_qwen1.5-4b.yaml": ("Qwen1.5-4B-Chat",),
    "ram2c_dpo_minicpm-2b.yaml": ("MiniCPM-2B-sft-bf16", "MiniCPM-2B-sft", "MiniCPM-2B-sft-fp32"),
    "ram2c_dpo_chatglm3-6b.yaml": ("chatglm3-6b",),
}
HOW = (
    "set EDUMAS_MODELS_DIR to a folder holding Qwen1.5-4B-Chat, MiniCPM-2B-sft-bf16 and chatglm3-6b "
    "(Hugging Face folders; tokenizer + config + remote code suffice without -m gpu, weights for -m gpu)"
)
MESSAGES = [
    {"role": "system", "content": "You are a patient tutor."},
    {"role": "user", "content": "Why do we have seasons?"},
    {"role": "assistant", "content": "What do you think changes over a year: distance, or the angle of sunlight?"},
]


def real_model_dir(candidates: tuple[str, ...]) -> Path:
    """The first existing folder among ``candidates`` in ``EDUMAS_MODELS_DIR``; skips with what to set."""
    root = os.environ.get("EDUMAS_MODELS_DIR")
    if not root:
        pytest.skip(f"real-model check: {HOW}")
    for name in candidates:
        if (Path(root) / name / "config.json").is_file():
            return Path(root) / name
    pytest.skip(f"real-model check: none of {list(candidates)} in EDUMAS_MODELS_DIR={root}; {HOW}")


def load_preset(preset: str, model_dir: Path, tmp_path: Path, **overrides) -> dict:
    """The preset's ``train`` section pointed at ``model_dir`` and a dataset built with its tokenizer."""
    import yaml

    from pipelines.training.dataset_builder import MakeDatasetsConfig, build_datasets
    from pipelines.training.dataset_targets import model_targets

    data = tmp_path / "data"
    build_datasets(
        MakeDatasetsConfig(
            inputs=[{"path": str(PROJECT_ROOT / "data/demo/ram2c/dpo.jsonl"), "kind": "dpo", "required": True}],
            output_dir=str(data),
            eval_fraction=0.0,
            reports_dir=str(tmp_path / "reports_data"),
        ),
        model_targets(str(model_dir), max_length=512),
    )
    train = yaml.safe_load((PROJECT_ROOT / "configs/training" / preset).read_text(encoding="utf-8"))["train"]
    train.update(
        model=str(model_dir),
        dataset=str(data / "dpo"),
        data_card=str(data / "data_card.json"),
        output_dir=str(tmp_path / "run"),
        reports_dir=str(tmp_path / "reports"),
        max_length=512,
        tracking={"report_to": "none"},
    )
    train.update(overrides)
    return json.loads(json.dumps(train))
