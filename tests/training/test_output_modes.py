"""Outputs a second user can read: under umask 022 every folder written by make_datasets, prepare_models and a
training run (final/, checkpoints/) is 0755 and every file 0644, safetensors included (``tempfile.mkdtemp``
makes folders 0700, safetensors' ``save_file`` files 0600)."""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def umask(value: int):
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def modes_under(folder: Path) -> dict[str, int]:
    """``{relative path: mode}`` of everything below ``folder`` (pytest's own is 0700), except plain-mode ones."""
    odd = {}
    for path in folder.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode != (0o755 if path.is_dir() else 0o644):
            odd[str(path.relative_to(folder))] = oct(mode)
    return odd


def test_apply_umask_modes_follows_the_umask(tmp_path):
    from pipelines.io import apply_umask_modes

    (tmp_path / "sub").mkdir(mode=0o700)
    (tmp_path / "sub" / "weights.bin").write_bytes(b"x")
    os.chmod(tmp_path / "sub" / "weights.bin", 0o600)
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "run.sh", 0o700)
    with umask(0o027):
        apply_umask_modes(tmp_path)
    assert stat.S_IMODE((tmp_path / "sub").stat().st_mode) == 0o750
    assert stat.S_IMODE((tmp_path / "sub" / "weights.bin").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o750  # an execute bit is kept


def test_saved_datasets_have_plain_modes(tmp_path):
    from pipelines.training.dataset_builder import save_dataset_dict

    row = {"id": "a", "source": "s", "prompt": [{"role": "user", "content": "q"}],
           "completion": [{"role": "assistant", "content": "a"}], "meta": "{}"}  # fmt: skip
    with umask(0o022):
        save_dataset_dict({"train": [row]}, "sft", tmp_path / "sft")
        save_dataset_dict({}, "dpo", tmp_path / "dpo")  # EMPTY.md only
    assert (tmp_path / "sft" / "dataset_dict.json").is_file() and (tmp_path / "dpo" / "EMPTY.md").is_file()
    assert modes_under(tmp_path) == {}


def test_prepared_model_folders_have_plain_modes(tmp_path):
    import torch
    from safetensors.torch import save_file

    from pipelines.models.prepare import _partial_dir, _replace_dir

    dest = tmp_path / "models" / "base" / "m"
    with umask(0o022):
        tmp = _partial_dir(dest)
        tmp.mkdir()
        save_file({"w": torch.zeros(2)}, str(tmp / "model.safetensors"))  # what save_pretrained writes: 0600
        _replace_dir(tmp, dest)
    assert (dest / "model.safetensors").is_file()
    assert modes_under(tmp_path) == {}


@pytest.mark.slow
def test_training_outputs_have_plain_modes(tiny_model, tiny_data, tmp_path):
    from pipelines.training.run import run_training
    from tests.training.conftest import train_config

    cfg = train_config(tiny_model, tiny_data, tmp_path / "run", "sft", merge=True,
                       schedule={"max_steps": 2, "save_steps": 1})  # fmt: skip
    with umask(0o022):
        run_training(cfg)
    assert (cfg.final_dir / "adapter_model.safetensors").is_file()
    assert (cfg.checkpoints_dir / "checkpoint-1" / "adapter_model.safetensors").is_file()
    assert (cfg.merged_dir / "model.safetensors").is_file()
    assert modes_under(Path(cfg.output_dir)) == {}
