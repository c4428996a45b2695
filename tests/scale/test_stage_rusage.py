"""The shard step's stage-only measurement (benchmarks/scale/stage_rusage.py): a command's own CPU
and exit status, and the launch file's Python shim that puts it between the script and the stage."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.scale import stage_rusage

BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\nraise SystemExit(3)"


def test_the_commands_cpu_and_exit_status_are_written(tmp_path):
    out = tmp_path / "stage.json"
    code = stage_rusage.main(["--out", str(out), "--", sys.executable, "-c", BURN])
    figures = json.loads(out.read_text())
    assert code == 3 and figures["returncode"] == 3
    assert 0.3 <= figures["cpu_s"] < 2.0 and figures["wall_s"] >= 0.3 and figures["peak_rss_mb"] > 1


def test_the_shim_measures_a_generate_stage_and_passes_other_commands_through(tmp_path):
    out = tmp_path / "stage.json"
    venv = stage_rusage.python_shim(tmp_path / "venv", out=out, python=sys.executable)
    python = str(venv / "bin/python")
    other = subprocess.run([python, "-c", "print('plain')"], capture_output=True, text=True, check=True)
    assert other.stdout == "plain\n" and not out.exists()
    # stages.generate_<anything> goes through the launcher; a missing module fails, measured, with its status
    stage = subprocess.run([python, "-m", "stages.generate_none", "--params", "x.yaml"], capture_output=True,
                           text=True, cwd=tmp_path)
    figures = json.loads(out.read_text())
    assert stage.returncode == 1 and figures["returncode"] == 1
    assert "No module named stages.generate_none" in stage.stderr
