"""Record the real team output the report and trace-browser tests read: a whole ``dvc repro`` of the
smoke profile on the offline models, in a fresh copy of this working tree (as
tests/test_end_to_end.py runs it), then every file the report stage reads copied into
``tests/evaluation/recorded/smoke/`` with ``RECORDED.json`` saying when and from which commit.

Run it again whenever a team's output changes (trace rows, metrics keys, predictions rows);
``tests/evaluation/test_recorded_shapes.py`` fails when the code's rows no longer have the
recorded shape. About 30-60 min on 2 CPU cores::

    PYTHONPATH=$PWD python -m tests.evaluation.recorded.record             # run the smoke profile, then copy
    PYTHONPATH=$PWD python -m tests.evaluation.recorded.record --from DIR  # copy from a finished smoke run in DIR
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.evaluation.recorded import FILES, RECORDED, ROOT


def smoke_run(target: Path) -> float:
    """``dvc repro`` of the smoke profile in ``target`` (a copy of this working tree); its seconds."""
    from tests.test_end_to_end import _dvc, _env, _project_copy

    _project_copy(target)
    subprocess.run([sys.executable, "-m", "pipelines.profiles", "smoke", "--write", "params.yaml"],
                   cwd=target, env=_env(), check=True)  # fmt: skip
    git = ["git", "-c", "user.name=edumas-record", "-c", "user.email=record@edumas.invalid"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "smoke profile"]):
        subprocess.run([*git, *command], cwd=target, check=True, capture_output=True)
    started = time.monotonic()
    done = _dvc(target, "repro", timeout=4 * 3600)
    if done.returncode != 0:
        raise SystemExit(f"dvc repro failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def copy_outputs(source: Path, *, seconds: float | None) -> None:
    if RECORDED.exists():
        shutil.rmtree(RECORDED)
    for name in FILES:
        if not (source / name).exists():
            raise SystemExit(f"{source / name} is missing: the smoke run did not write it")
        (RECORDED / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, RECORDED / name)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())  # fmt: skip
    info = {"profile": "smoke", "command": "dvc repro (python -m tests.evaluation.recorded.record)",
            "commit": commit, "working_tree_differed": dirty,
            "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "repro_seconds": None if seconds is None else round(seconds), "files": list(FILES)}  # fmt: skip
    (RECORDED / "RECORDED.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    print(f"recorded {len(FILES)} files into {RECORDED}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", help="a finished smoke-profile project folder to copy from")
    args = parser.parse_args(argv)
    if args.source:
        copy_outputs(Path(args.source), seconds=None)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        seconds = smoke_run(Path(tmp) / "edumas")
        copy_outputs(Path(tmp) / "edumas", seconds=seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
