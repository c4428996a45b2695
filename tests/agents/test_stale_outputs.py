"""Issue 37.7: after SIGTERM the ``traces.jsonl`` and ``failures.json`` of an earlier run stayed beside
the "outputs on disk are whole" line; a stopped run of the harness removes them."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pipelines.stage import TERMINATED_EXIT_CODE

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from pipelines.agents.harness import GenerationOutputs, System, run_systems
    from pipelines.llm.accounting import Accounting
    from pipelines.stage import run_stage

    out = Path(sys.argv[1])

    async def slow(item, trace):
        (out / "ready").touch()
        await asyncio.sleep(60)

    def body():
        outputs = GenerationOutputs(generated_dir=str(out / "gen"), reports_dir=str(out / "rep"))
        asyncio.run(run_systems([1, 2], [System("s", slow)], accounting=Accounting(), outputs=outputs,
                                sample_id=str, prediction_row=lambda i, p: p, progress=False))
        return 0

    sys.exit(run_stage(body, []))
    """
)


def test_a_stopped_run_leaves_no_output_of_an_earlier_run(tmp_path: Path) -> None:
    for name in ("gen/predictions.jsonl", "gen/traces.jsonl", "rep/failures.json", "rep/usage.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("from an earlier run\n")
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=root, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == TERMINATED_EXIT_CODE, stderr
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["ready"], left  # before: the earlier run's four files stayed
