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


def test_the_shards_line_sets_stage_processes_and_trees_against_the_one_run():
    from benchmarks.paper_scale import shards_line

    row = {"count": 2, "stage_cpu_s": 6.0, "tree_cpu_s": 8.0,
           "shards": [{"stage_cpu_s": 2.5}, {"stage_cpu_s": 3.5}]}
    assert shards_line("kgc", row, 4.0) == (
        "kgc: 2 shards, stage processes' CPU 6.0 s = 1.50 x the one run's 4.0 s (2.5 to 3.5 s each); "
        "process trees' CPU 8.0 s = 2.00 x the one run's 4.0 s")
    unmeasured = {**row, "stage_cpu_s": None, "shards": [{"stage_cpu_s": None}] * 2}
    assert shards_line("kgc", unmeasured, None) == (
        "kgc: 2 shards, stage processes' CPU not measured; process trees' CPU 8.0 s")


def test_a_shards_stage_figures_come_from_its_files(tmp_path):
    from benchmarks.scale.sharded import answered_by, stage_figures

    stats = tmp_path / "server.json"
    stats.write_text('[{"counts": {"answered": 7}}, {"counts": {"answered": 5}}]')
    assert answered_by(stats) == 12
    stats.write_text('[{"counts": ')  # cut short by the launch file's exit trap
    assert answered_by(stats) is None and answered_by(tmp_path / "none.json") is None
    assert stage_figures(tmp_path / "none.json", tmp_path / "none.json", 3) == {"stage_cpu_s": None}
    own = tmp_path / "stage.json"
    own.write_text('{"returncode": 0, "wall_s": 9.0, "cpu_s": 2.0, "peak_rss_mb": 100.0}')
    assert stage_figures(own, tmp_path / "none.json", 4) == {
        "stage_cpu_s": 2.0, "stage_wall_s": 9.0, "stage_peak_rss_mb": 100.0, "stage_returncode": 0, "calls": 4}
