"""The prepare_models stage: reuse of an identical conversion, metrics, and a model that loads fast and chats."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from pipelines.models.prepare import CONVERTER_VERSION, existing_conversion, sha256_file, smollm2_gguf_path
from stages.prepare_models import main
from tests.tiny_models import smollm2_dir


def linked_copy(source: Path, dest: Path) -> Path:
    """Copy a model folder by hard links when the file system allows it (fast, no extra disk)."""
    try:
        shutil.copytree(source, dest, copy_function=os.link)
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(source, dest)
    return dest


def write_params(path: Path, section: dict) -> Path:
    path.write_text(yaml.safe_dump({"prepare_models": section}))
    return path


def test_existing_conversion_requires_same_source_dtype_version_and_weights(tmp_path):
    info = {"source_sha256": "abc", "dtype": "float32", "converter_version": CONVERTER_VERSION}
    (tmp_path / "SOURCE.json").write_text(json.dumps(info))
    assert existing_conversion(tmp_path, "abc", "float32", "model.safetensors") is None  # no weights yet
    (tmp_path / "model.safetensors").write_bytes(b"x")
    assert existing_conversion(tmp_path, "abc", "float32", "model.safetensors") == info
    assert existing_conversion(tmp_path, "abd", "float32", "model.safetensors") is None
    assert existing_conversion(tmp_path, "abc", "bfloat16", "model.safetensors") is None
    (tmp_path / "SOURCE.json").write_text(json.dumps(info | {"converter_version": CONVERTER_VERSION - 1}))
    assert existing_conversion(tmp_path, "abc", "float32", "model.safetensors") is None
    assert existing_conversion(tmp_path / "missing", "abc", "float32", "model.safetensors") is None


def test_bad_params_stop_the_stage_with_exit_code_2(tmp_path, capsys):
    params = write_params(tmp_path / "params.yaml", {"dtype": "float64"})
    assert main(["--params", str(params)]) == 2
    assert "dtype" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_stage_reuses_the_conversion_writes_metrics_and_the_model_loads_fast_and_chats(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    chat_dir = linked_copy(smollm2_dir(), tmp_path / "models" / "base" / "smollm2-135m-instruct")
    embedder_dir = tmp_path / "models" / "base" / "all-minilm-l6-v2"
    reports = tmp_path / "reports" / "prepare_models"
    section = {
        "chat_model_dir": str(chat_dir),
        "embedder_dir": str(embedder_dir),
        "reports_dir": str(reports),
        "smoke_prompt": "What is the capital of France?",
        "smoke_max_tokens": 10,
    }
    assert main(["--params", str(write_params(tmp_path / "params.yaml", section))]) == 0
    metrics = json.loads((reports / "metrics.json").read_text())

    chat, embedder = metrics["chat_model"], metrics["embedding_model"]
    assert chat["reused"] is True and embedder["reused"] is False
    assert chat["source_sha256"] == sha256_file(smollm2_gguf_path())
    assert chat["parameters"] == 134_515_008 and chat["architecture"] == "LlamaForCausalLM"
    assert "Paris" in chat["reply"] and chat["load_seconds"] < 5
    assert embedder["source_sha256"] == sha256_file(embedder_dir / "model.safetensors")
    assert (embedder_dir / "modules.json").exists() and not list(tmp_path.rglob("*.partial-*"))

    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(chat_dir))
    assert time.perf_counter() - start < 5  # safetensors: well under 1 s on an idle machine
    tokenizer = AutoTokenizer.from_pretrained(str(chat_dir))
    assert tokenizer.eos_token == "<|im_end|>" == tokenizer.pad_token
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2+2?"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=16, do_sample=False)
    new = out[0, ids["input_ids"].shape[1] :].tolist()
    reply = tokenizer.decode(new, skip_special_tokens=True)
    assert "4" in reply and "<|im_start|>" not in tokenizer.decode(new)
    assert tokenizer.eos_token_id in new  # the reply ends with <|im_end|>, not at the length limit

    assert main(["--params", str(tmp_path / "params.yaml")]) == 0
    again = json.loads((reports / "metrics.json").read_text())
    assert again["chat_model"]["reused"] and again["embedding_model"]["reused"]
