"""A stage killed with SIGTERM (``kill``, Slurm's time limit, ``dvc`` stopping a job) leaves no
half-written output and no hidden temporary file behind, also from inside an asyncio run."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipelines.stage import TERMINATED_EXIT_CODE

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from pipelines.io import atomic_open, write_json_atomic
    from pipelines.stage import run_stage

    out = Path(sys.argv[1])
    use_asyncio = sys.argv[2] == "asyncio"

    def body():
        write_json_atomic(out / "done.json", {"ok": True})       # finished before the kill: stays
        with atomic_open(out / "predictions.jsonl") as handle:   # unfinished at the kill: never appears
            handle.write('{"id": 1}\\n')
            handle.flush()
            (out / "ready").touch()
            if use_asyncio:
                async def wait():
                    await asyncio.sleep(60)
                asyncio.run(wait())
            else:
                time.sleep(60)
        return 0

    sys.exit(run_stage(body, []))
    """
)


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_sigterm_removes_unfinished_outputs(tmp_path: Path, mode: str) -> None:
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path), mode], cwd=root, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "the script never got ready"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == TERMINATED_EXIT_CODE == 143
    assert "stopped by SIGTERM" in stderr
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == ["done.json", "ready"], names  # no predictions.jsonl, no .predictions.jsonl.*.tmp


def test_a_sigkilled_stage_leaves_temporaries_that_the_next_run_removes(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path), "sync"], cwd=root, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "the script never got ready"
        time.sleep(0.05)
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
