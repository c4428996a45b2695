"""Which checkpoint a launch resumes from, and that no checkpoint is ever deleted: a changed run moves the
old ones aside, a relaunch on another number of processes refuses with both ways on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.conftest import train_config


def checkpoint(folder: Path, step: int, *, complete: bool = True) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (path / "optimizer.pt").write_bytes(b"hours of work")
    return path


def superseded(folder: Path) -> list[Path]:
    return sorted((folder / "superseded").glob("*/checkpoint-*"))


def test_a_changed_run_starts_from_zero_and_keeps_the_old_checkpoints(tiny_model, tiny_data, tmp_path):
    from pipelines.training.checkpoints import fingerprint_parts, resolve_resume

    folder = tmp_path / "checkpoints"
    checkpoint(folder, 4)
    checkpoint(folder, 6, complete=False)  # cut short by a kill
    params = train_config(tiny_model, tiny_data, tmp_path, "sft").model_dump()
    parts = fingerprint_parts(params, "data")
    assert resolve_resume(folder, parts, "auto") is None  # no fingerprint stored yet: fresh start, nothing lost
    assert not (folder / "checkpoint-4").exists()
    assert [p.name for p in superseded(folder)] == ["checkpoint-4", "checkpoint-6"]
    assert (superseded(folder)[0] / "optimizer.pt").read_bytes() == b"hours of work"
    checkpoint(folder, 4)
    longer = params | {"schedule": params["schedule"] | {"max_steps": 50}}
    assert resolve_resume(folder, fingerprint_parts(longer, "data"), "auto") == folder / "checkpoint-4"
    other_lr = params | {"schedule": params["schedule"] | {"learning_rate": 0.5}}
    assert resolve_resume(folder, fingerprint_parts(other_lr, "data"), "auto") is None
    assert len(superseded(folder)) == 3 and not (folder / "checkpoint-4").exists()
    notes = [json.loads(p.read_text()) for p in (folder / "superseded").glob("*/SUPERSEDED.json")]
    assert any(n["reason"] == "the run changed (params)" for n in notes), notes
    checkpoint(folder, 2)
    assert resolve_resume(folder, fingerprint_parts(other_lr, "data"), "never") is None  # never: moved aside too
    assert len(superseded(folder)) == 4
    assert fingerprint_parts(params, "other data") != parts  # new data is a new run too


def test_a_relaunch_on_another_number_of_processes_refuses_and_says_how_to_go_on(tiny_model, tiny_data, tmp_path):
    """A preempted 16-process job relaunched on 8: neither resumed (ZeRO shards differ) nor wiped."""
    from pipelines.training.checkpoints import ResumeRefused, fingerprint_parts, resolve_resume

    folder = tmp_path / "checkpoints"
    params = train_config(tiny_model, tiny_data, tmp_path, "sft").model_dump()
    assert resolve_resume(folder, fingerprint_parts(params, "data", world_size=16), "auto") is None
    checkpoint(folder, 120)
    with pytest.raises(ResumeRefused, match=r"relaunch with 16 processes .* step 120.* resume: never") as refused:
        resolve_resume(folder, fingerprint_parts(params, "data", world_size=8), "auto")
    assert "this launch has 8" in str(refused.value)
    assert (folder / "checkpoint-120" / "optimizer.pt").is_file() and not superseded(folder)
    assert resolve_resume(folder, fingerprint_parts(params, "data", world_size=16), "auto") == folder / "checkpoint-120"
    assert resolve_resume(folder, fingerprint_parts(params, "data", world_size=8), "never") is None
    assert [p.name for p in superseded(folder)] == ["checkpoint-120"]
