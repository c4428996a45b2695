"""Shared fixtures for the training tests: a tiny random Qwen2 on the real Qwen tokenizer, the ChatGLM3
and MiniCPM stand-ins (``tests/standins``), and small memorisable SFT/DPO datasets built by
``make_datasets`` itself with each model's tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tiny_models import tiny_qwen2

SFT_ROWS = [
    {"id": f"s{i}", "source": "kgc", "messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}
    for i, (q, a) in enumerate(
        [
            ("Capital of France?", "Paris is the capital."),
            ("2 plus 2?", "It is four."),
            ("Sky colour?", "Blue, usually."),
        ]
    )
]
DPO_ROWS = [
    {
        "id": f"d{i}",
        "source": "ram2c",
        "prompt": [{"role": "user", "content": q}],
        "chosen": [{"role": "assistant", "content": "What do you already know?"}],
        "rejected": [{"role": "assistant", "content": "Go away now."}],
    }
    for i, q in enumerate(["Why is ice light?", "Help with fractions?", "What is a verb?"])
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2", layers=1, hidden=32)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory, tiny_model) -> Path:
    """``<root>/{sft,dpo}`` datasets (every row in train: eval_fraction 0) and ``data_card.json``."""
    return build_tiny_data(tmp_path_factory.mktemp("data"), tiny_model)


@pytest.fixture(scope="session")
def chatglm3_model(tmp_path_factory) -> Path:
    from tests.standins import tiny_chatglm3

    return tiny_chatglm3(tmp_path_factory.mktemp("standin") / "chatglm3")


@pytest.fixture(scope="session")
def minicpm_model(tmp_path_factory) -> Path:
    from tests.standins import tiny_minicpm

    return tiny_minicpm(tmp_path_factory.mktemp("standin") / "minicpm")


@pytest.fixture(scope="session")
def family_models(tiny_model, chatglm3_model, minicpm_model) -> dict[str, Path]:
    """One small model per supported family with its own structure: ``qwen2``, ``chatglm3``, ``minicpm``."""
    return {"qwen2": tiny_model, "chatglm3": chatglm3_model, "minicpm": minicpm_model}


@pytest.fixture(scope="session")
def family_data(tmp_path_factory, family_models) -> dict[str, Path]:
    """The SFT/DPO datasets built with each family model's tokenizer (``<root>/{sft,dpo}``, ``data_card.json``)."""
    return {name: build_tiny_data(tmp_path_factory.mktemp(f"data-{name}"), m) for name, m in family_models.items()}


def build_tiny_data(root: Path, model: Path) -> Path:
    from pipelines.training.dataset_builder import MakeDatasetsConfig, build_datasets
    from pipelines.training.dataset_targets import model_targets

    cfg = MakeDatasetsConfig(
        inputs=[
            {"path": str(write_jsonl(root / "in" / "sft.jsonl", SFT_ROWS)), "kind": "sft"},
            {"path": str(write_jsonl(root / "in" / "dpo.jsonl", DPO_ROWS)), "kind": "dpo"},
        ],
        output_dir=str(root / "train"),
        eval_fraction=0.0,
        reports_dir=str(root / "reports"),
    )
    build_datasets(cfg, model_targets(str(model)))
    return root / "train"


def train_config(tiny_model: Path, tiny_data: Path, out: Path, method: str, **overrides):
    """A fast LoRA config on the tiny model (batch 1, short sequences, high learning rate)."""
    from pipelines.training.config import TrainConfig

    schedule = {
        "max_steps": 20,
        "learning_rate": 1e-2,
        "lr_scheduler_type": "constant",
        "warmup_ratio": 0.0,
        "per_device_train_batch_size": 1,
        "save_steps": 100,
    }
    schedule.update(overrides.pop("schedule", {}))
    data = {
        "method": method,
        "model": str(tiny_model),
        "dataset": str(tiny_data / method),
        "data_card": str(tiny_data / "data_card.json"),
        "output_dir": str(out),
        "max_length": 48,
        "lora": {"r": 8, "alpha": 16, "dropout": 0.0},
        "schedule": schedule,
        "reports_dir": str(out / "reports"),
        "tracking": {"report_to": "none"},
    }
    data.update(overrides)
    return TrainConfig.model_validate(data)


@pytest.fixture(scope="session")
def _qwen_tokenizer_session():
    from tests.tiny_models import load_qwen_tokenizer

    return load_qwen_tokenizer()


@pytest.fixture
def qwen_tokenizer(_qwen_tokenizer_session):
    """The real Qwen tokenizer (loaded once); template, pad token, padding side and the instance-level chat
    encoder / pad shim that ``prepare_tokenizer`` installs are restored after each test."""
    tokenizer = _qwen_tokenizer_session
    saved = (tokenizer.chat_template, tokenizer.pad_token, tokenizer.padding_side)
    yield tokenizer
    tokenizer.chat_template, tokenizer.pad_token, tokenizer.padding_side = saved
    for name in ("apply_chat_template", "_edumas_original_apply_chat_template", "_pad"):
        tokenizer.__dict__.pop(name, None)
