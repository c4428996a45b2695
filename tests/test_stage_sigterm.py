"""A stage killed with SIGTERM (``kill``, Slurm's time limit, ``dvc`` stopping a job) or SIGINT
(Ctrl-C) leaves no half-written output and no hidden temporary file behind, also from inside an
asyncio run with work in a worker thread; it stops at once with one line (exit 143 or 130)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipelines.stage import INTERRUPTED_EXIT_CODE, TERMINATED_EXIT_CODE

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from pipelines.io import atomic_open, write_json_atomic
    from pipelines.stage import run_stage

    out = Path(sys.argv[1])
    mode = sys.argv[2]

    def body():
        write_json_atomic(out / "done.json", {"ok": True})       # finished before the kill: stays
        with atomic_open(out / "predictions.jsonl") as handle:   # unfinished at the kill: never appears
            handle.write('{"id": 1}\\n')
            handle.flush()
            (out / "ready").touch()
            if mode == "asyncio":
                async def wait():
                    await asyncio.sleep(60)
                asyncio.run(wait())
            elif mode == "thread":  # a model generating in a worker thread: the stop must not wait for it
                async def compute():
                    await asyncio.to_thread(time.sleep, 60)
                asyncio.run(compute())
            else:
                time.sleep(60)
        return 0

    sys.exit(run_stage(body, []))
    """
)


def _start_ready(tmp_path: Path, mode: str) -> subprocess.Popen:
    """The script in ``mode``, once it holds an unfinished output open."""
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path), mode], cwd=root, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "the script never got ready"
        time.sleep(0.05)
    return process


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_sigterm_removes_unfinished_outputs(tmp_path: Path, mode: str) -> None:
    process = _start_ready(tmp_path, mode)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == TERMINATED_EXIT_CODE == 143
    assert "stopped by SIGTERM" in stderr
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == ["done.json", "ready"], names  # no predictions.jsonl, no .predictions.jsonl.*.tmp


def test_a_sigkilled_stage_leaves_temporaries_that_the_next_run_removes(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    process = _start_ready(tmp_path, "sync")
    process.send_signal(signal.SIGKILL)  # no handler runs: the temporary file stays
    process.communicate(timeout=30)
    (left,) = tmp_path.glob(".predictions.jsonl.*.tmp")
    (tmp_path / "ready").unlink()
    rerun = subprocess.run(
        [sys.executable, "-c", SCRIPT.replace("time.sleep(60)", "pass"), str(tmp_path), "sync"], cwd=root,
        capture_output=True, text=True, timeout=60,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert not left.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["done.json", "predictions.jsonl", "ready"]


@pytest.mark.parametrize("mode", ["sync", "asyncio", "thread"])
def test_sigint_stops_at_once_like_sigterm(tmp_path: Path, mode: str) -> None:
    process = _start_ready(tmp_path, mode)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - started < 20  # not after the worker thread's 60 s
    assert process.returncode == INTERRUPTED_EXIT_CODE == 130, stderr
    assert stderr.strip().splitlines() == [
        "error: stopped by SIGINT (Ctrl-C); the outputs on disk are whole (unfinished files were removed) and "
        "a rerun repeats no finished LLM call"
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["done.json", "ready"]
