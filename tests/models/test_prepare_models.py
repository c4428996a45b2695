"""The prepare_models stage: reuse of an identical conversion, metrics, and a model that loads fast and chats."""

from __future__ import annotations

import filecmp
import json
import logging
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from pipelines.io import plain_file_mode
from pipelines.models import prepare
from pipelines.models.prepare import (
    CONVERTER_VERSION,
    cached_conversion,
    convert_gguf_model,
    existing_conversion,
    sha256_file,
    smollm2_gguf_path,
    user_cache_entry,
)
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


class FakeConverter:
    """Stands in for the minute-long real conversion: writes SOURCE.json and a small weights file
    (numbered by call, so a refreshed folder can be told from an old one) and counts its calls."""

    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, gguf_path: Path, dest: Path, *, source_sha256: str, dtype: str) -> dict:
        self.calls.append(dest)
        tmp = prepare._partial_dir(dest)
        tmp.mkdir()
        (tmp / "model.safetensors").write_bytes(f"weights {len(self.calls)} {dtype}".encode())
        info = {"source": gguf_path.name, "source_sha256": source_sha256, "converter_version": CONVERTER_VERSION,
                "dtype": dtype, "parameters": 7}
        (tmp / "SOURCE.json").write_text(json.dumps(info))
        prepare._replace_dir(tmp, dest)
        return info


def refuse_to_convert(*args, **kwargs):
    raise AssertionError("converted although the user cache holds the conversion")


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch) -> Path:
    """A small stand-in GGUF file, an empty per-user cache under tmp_path and the fake converter installed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setattr(prepare, "_convert_into", FakeConverter())
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF tiny stand-in")
    return path


def entry_of(gguf: Path, dtype: str = "float32") -> Path:
    return user_cache_entry(gguf, sha256_file(gguf), dtype)


def same_files(left: Path, right: Path) -> bool:
    names = sorted(p.name for p in left.iterdir())
    return names == sorted(p.name for p in right.iterdir()) and filecmp.cmpfiles(left, right, names, shallow=False)[0] == names


def test_the_first_conversion_fills_the_user_cache_and_another_folder_copies_it_without_converting(
    fake_gguf, tmp_path, monkeypatch
):
    first = convert_gguf_model(fake_gguf, tmp_path / "a", dtype="float32")
    entry = entry_of(fake_gguf)
    assert first["reused"] is False and first["from_user_cache"] is False
    assert entry.parent == tmp_path / "xdg-cache" / "edumas" / "models" and sha256_file(fake_gguf) in entry.name
    assert same_files(tmp_path / "a", entry)

    monkeypatch.setattr(prepare, "_convert_into", refuse_to_convert)
    second = convert_gguf_model(fake_gguf, tmp_path / "b", dtype="float32")
    assert second["reused"] is True and second["from_user_cache"] is True and second["parameters"] == 7
    assert same_files(tmp_path / "b", entry)
    assert all(path.stat().st_mode & 0o777 == plain_file_mode() for path in (tmp_path / "b").iterdir())
    assert not list(tmp_path.rglob("*.partial-*"))

    third = convert_gguf_model(fake_gguf, tmp_path / "b", dtype="float32")  # dest itself holds it now
    assert third["reused"] is True and third["from_user_cache"] is False


def test_another_dtype_or_force_converts_again_and_force_refreshes_the_cache_entry(fake_gguf, tmp_path):
    converter = prepare._convert_into
    convert_gguf_model(fake_gguf, tmp_path / "a", dtype="float32")
    other = convert_gguf_model(fake_gguf, tmp_path / "b", dtype="bfloat16")
    assert other["reused"] is False and len(converter.calls) == 2
    assert (entry_of(fake_gguf, "bfloat16") / "model.safetensors").read_bytes() == b"weights 2 bfloat16"

    forced = convert_gguf_model(fake_gguf, tmp_path / "c", dtype="float32", force=True)
    assert forced["reused"] is False and forced["from_user_cache"] is False and len(converter.calls) == 3
    assert (entry_of(fake_gguf) / "model.safetensors").read_bytes() == b"weights 3 float32"


def test_a_broken_cache_entry_is_converted_again_and_rebuilt(fake_gguf, tmp_path):
    converter = prepare._convert_into
    convert_gguf_model(fake_gguf, tmp_path / "a")
    (entry_of(fake_gguf) / "model.safetensors").unlink()
    again = convert_gguf_model(fake_gguf, tmp_path / "b")
    assert again["reused"] is False and len(converter.calls) == 2
    assert same_files(tmp_path / "b", entry_of(fake_gguf))


def test_a_cache_that_cannot_be_written_only_logs_a_warning(fake_gguf, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    with caplog.at_level(logging.WARNING, logger="pipelines.models.prepare"):
        info = convert_gguf_model(fake_gguf, tmp_path / "a")
    assert info["reused"] is False and (tmp_path / "a" / "model.safetensors").exists()
    assert "not cached" in caplog.text


def test_cached_conversion_converts_into_the_entry_once_and_rebuilds_a_broken_one(fake_gguf):
    converter = prepare._convert_into
    entry = cached_conversion(fake_gguf, "float32")
    assert entry == entry_of(fake_gguf) and converter.calls == [entry]
    assert cached_conversion(fake_gguf, "float32") == entry and len(converter.calls) == 1
    (entry / "model.safetensors").unlink()
    cached_conversion(fake_gguf, "float32")
    assert len(converter.calls) == 2 and (entry / "model.safetensors").exists()
    cached_conversion(fake_gguf, "float32", force=True)
    assert len(converter.calls) == 3


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
    assert again["chat_model"]["from_user_cache"] is False

    # a fresh project folder: the stage copies smollm2_dir()'s conversion (the user cache entry) instead of converting
    fresh = write_params(tmp_path / "fresh.yaml", section | {"chat_model_dir": str(tmp_path / "fresh"), "smoke_prompt": ""})
    assert main(["--params", str(fresh)]) == 0
    copied = json.loads((reports / "metrics.json").read_text())["chat_model"]
    assert copied["reused"] is True and copied["from_user_cache"] is True
    assert same_files(tmp_path / "fresh", smollm2_dir())
