"""A stage's own process ends through ``exit_stage_process``: its exit status is the stage's, and the
objects alive then are frozen out of the garbage collector (the interpreter's teardown skips them)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.agents.generate_stage import exit_stage_process

ROOT = Path(__file__).resolve().parents[2]


def test_the_code_is_the_exit_status_and_the_objects_are_frozen():
    assert gc.get_freeze_count() == 0
    try:
        with pytest.raises(SystemExit) as exited:
            exit_stage_process(3)
        assert exited.value.code == 3
        assert gc.get_freeze_count() > 1000  # the modules imported so far, at least
    finally:
        gc.unfreeze()  # this test process goes on
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("stage", ["generate_kgc", "generate_ram2c", "generate_tagging"])
def test_a_stage_run_as_a_module_exits_with_its_code(tmp_path, stage):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDUMAS_TRACKING": "0"}
    done = subprocess.run(
        [sys.executable, "-m", f"stages.{stage}", "--params", str(tmp_path / "absent.yaml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr  # bad params
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'absent.yaml'}: file not found; run from the project root or pass --params"
    )
