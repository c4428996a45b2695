"""Temporaries carry their writer's pid: a stage removes, when it starts, the ones a SIGKILLed run left
beside or under its DVC outputs (writer dead, written before this process started), never a live
writer's or another tool's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from pipelines.io import atomic_open, remove_stale_partial_folders, remove_stale_temporaries, temporary_sibling
from pipelines.stage import remove_stale_stage_temporaries, stage_outputs

OLD = 1_000_000_000  # an mtime before this process started


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _old(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("partial")
    os.utime(path, (OLD, OLD))
    return path


def test_temporaries_name_their_writer_and_a_live_one_is_kept(tmp_path: Path) -> None:
    fd, name = temporary_sibling(tmp_path / "p.jsonl")
    os.close(fd)
    assert Path(name).name.startswith(f".p.jsonl.{os.getpid()}.")
    dead = _old(tmp_path / f".p.jsonl.{_dead_pid()}.abc123.tmp")
    alive = _old(tmp_path / f".p.jsonl.{os.getppid()}.abc123.tmp")  # the test runner's parent: alive
    mine = _old(Path(name))
    assert remove_stale_temporaries(tmp_path / "p.jsonl") == [dead]
    assert alive.exists() and mine.exists()
    with atomic_open(tmp_path / "p.jsonl") as handle:  # writing again removes nothing of a live writer
        handle.write("{}\n")
    assert alive.exists() and not dead.exists()


def test_a_stage_start_removes_its_outputs_stale_temporaries(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("dvc.yaml").write_text(yaml.safe_dump({"stages": {"gen": {
        "cmd": "x", "outs": ["data/out", "data/traces.jsonl"], "metrics": [{"reports/m.json": {"cache": False}}]}}}))
    assert stage_outputs("gen") == [Path("data/out"), Path("data/traces.jsonl"), Path("reports/m.json")]
    pid = _dead_pid()
    left = [_old(Path(f"data/out/sub/.rows.jsonl.{pid}.x1y2z3.tmp")), _old(Path(f"data/.traces.jsonl.{pid}.q9w8.tmp")),
            _old(Path(f"reports/.m.json.{pid}.zz.tmp"))]
    kept = [_old(Path("data/out/.cache.tmp")),  # another tool's hidden file: no pid in its name
            _old(Path(f"data/.other.jsonl.{pid}.ab.tmp")),  # not an output of this stage
            _old(Path(f"data/.traces.jsonl.{os.getppid()}.cd.tmp"))]  # a live writer's
    assert sorted(remove_stale_stage_temporaries("gen")) == sorted(left)
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)
    assert remove_stale_stage_temporaries("absent") == []


def test_a_model_build_removes_the_partial_folders_killed_builds_left(tmp_path: Path) -> None:
    from pipelines.models.prepare import _partial_dir

    def folder(name: str) -> Path:
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(b"0" * 1024)
        os.utime(tmp_path / name, (OLD, OLD))
        return tmp_path / name

    dest = tmp_path / "smollm2"
    dead = folder(f"smollm2.partial-{_dead_pid()}")
    alive = folder(f"smollm2.partial-{os.getppid()}")  # a live builder's
    other = folder(f"smollm2-large.partial-{_dead_pid()}")  # another model's
    odd = folder("smollm2.partial-notapid")
    assert remove_stale_partial_folders(dest) == [dead] and not dead.exists()
    again = folder(dead.name)
    assert _partial_dir(dest) == tmp_path / f"smollm2.partial-{os.getpid()}"  # the builder clears them first
    assert not again.exists() and alive.exists() and other.exists() and odd.exists()
