"""One command's own CPU, wall time and peak RSS, written as JSON (benchmarks only).

    python -m benchmarks.scale.stage_rusage --out stage.json -- python -m stages.generate_kgc ...

runs the command as a child, waits for it with ``os.wait4`` (its CPU and that of the processes it
reaped, nothing of this launcher's) and exits with its exit status. The shard step puts it between
the launch file and the stage (:func:`python_shim`), so a shard's stage process is measured apart
from its process tree (the launch script, its helper Pythons, its own simulated server).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path


def python_shim(folder: Path, *, out: Path, python: str, cpu_split: Path | None = None) -> Path:
    """``folder/bin/python``: runs ``python -m stages.generate_*`` under this module (and under
    :mod:`benchmarks.scale.cpu_split` when ``cpu_split`` names its output), any other command as
    ``python`` itself; returns ``folder``, to be the launch file's ``VENV``."""
    real = shlex.quote(python)
    stage = [real, "-m", "benchmarks.scale.stage_rusage", "--out", shlex.quote(str(out)), "--", real]
    if cpu_split is not None:
        stage += ["-m", "benchmarks.scale.cpu_split", "--out", shlex.quote(str(cpu_split)), '"$2"', '"${@:3}"']
    else:
        stage += ['"$@"']
    root = shlex.quote(str(Path(__file__).resolve().parents[2]))  # where `benchmarks` imports from, any cwd
    script = (
        "#!/bin/bash\n"
        'if [[ "$1" == "-m" && "$2" == stages.generate_* ]]; then\n'
        f'    export PYTHONPATH={root}${{PYTHONPATH:+:$PYTHONPATH}}\n'
        f"    exec {' '.join(stage)}\n"
        "fi\n"
        f'exec {real} "$@"\n'
    )
    path = folder / "bin" / "python"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script, encoding="utf-8")
    path.chmod(0o755)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where the figures go (JSON)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    start = time.perf_counter()
    process = subprocess.Popen(command)
    _, status, usage = os.wait4(process.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "returncode": code,
        "wall_s": round(time.perf_counter() - start, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
    }), encoding="utf-8")
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
