"""What a summary states about its own making: the commit it was made from (and whether the working
tree differed), the digest of the params it read, the time, and the DVC experiment when DVC runs
one (``DVC_EXP_NAME``, with its baseline ``DVC_EXP_BASELINE_REV``).

    stamp = report_stamp(params, root=".")   # {"commit", "dirty", "params_digest", "made", "experiment", ...}
    stamp_line(stamp)                        # "Made 2025-01-02 03:04 UTC from commit 1a2b3c4 ..."
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def params_digest(params: Mapping[str, Any]) -> str:
    """The first 12 hex digits of the SHA-256 of ``params`` as canonical JSON (key order and YAML
    layout do not change it; any value does)."""
    text = json.dumps(params, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def report_stamp(params: Mapping[str, Any], *, root: Path | str = ".", now: dt.datetime | None = None) -> dict:
    """``{"commit", "dirty", "params_digest", "made", "experiment", "baseline"}``; ``commit`` is None
    outside a git checkout, ``dirty`` True when tracked files differ from it."""
    root = Path(root)
    commit = _git(root, "rev-parse", "HEAD")
    dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no")) if commit else False
    made = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return {
        "commit": commit,
        "dirty": dirty,
        "params_digest": params_digest(params),
        "made": made.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "experiment": os.environ.get("DVC_EXP_NAME") or None,
        "baseline": os.environ.get("DVC_EXP_BASELINE_REV") or None,
    }


def stamp_line(stamp: Mapping[str, Any] | None) -> str:
    """One sentence for the top of the summary."""
    if not stamp:
        return ""
    commit = stamp.get("commit")
    source = f"commit {commit[:10]}" if commit else "a folder that is not a git checkout"
    if commit and stamp.get("dirty"):
        source += " (the working tree differed from it)"
    line = f"Made {stamp.get('made', '?')} from {source}; params digest {stamp.get('params_digest', '?')}"
    if stamp.get("experiment"):
        baseline = f" on baseline {str(stamp['baseline'])[:10]}" if stamp.get("baseline") else ""
        line += f"; DVC experiment {stamp['experiment']}{baseline}"
    return line + "."
