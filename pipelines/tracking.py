"""Experiment tracking: one W&B run per stage, offline unless the user configures W&B.

``job_type`` is the stage name, ``group`` is ``DVC_EXP_NAME`` when DVC runs an experiment and
``repro-<start>-<pid>`` of the ``dvc repro`` process when a plain ``dvc repro`` runs the stage (every
stage of one repro in one group, as ``dvc exp run`` groups its stages).
W&B runs online only when ``WANDB_API_KEY`` is set or ``WANDB_MODE`` says so; otherwise runs are
written offline under ``wandb/`` (sync them later with ``wandb sync``). Config values whose key
looks secret (``api_key``, ``token``, ``password``, ``secret``), whose value equals a secret from the
environment, or that look like a key whatever their field (``sk-...``, ``Bearer ...``, long random
tokens: :mod:`pipelines.redaction`) are replaced by ``***`` before anything is logged (the W&B
config and its ``debug.log``); metrics files get the same look-based redaction (:func:`redact_values`).
"""

from __future__ import annotations

import logging
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pipelines.redaction import REDACTED, redact_keys

log = logging.getLogger(__name__)

SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|passwd|authorization)", re.I)
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.I)


def _proc_stat(pid: int) -> tuple[int, int]:
    """(parent pid, start time in clock ticks after boot) of ``pid``, from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[19])


def dvc_repro_group(env: dict[str, str] | None = None, *, max_depth: int = 8) -> str | None:
    """``repro-<YYYYmmdd-HHMMSS>-<pid>`` of the ``dvc repro`` (or ``dvc exp``) process that runs this
    stage, the same for every stage it runs; None outside DVC (no ``DVC_STAGE``) or off Linux."""
    env = dict(os.environ) if env is None else env
    if "DVC_STAGE" not in env:
        return None
    try:
        pid = os.getppid()
        for _ in range(max_depth):
            if pid <= 1:
                return None
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            words = [os.path.basename(a.decode(errors="replace")) for a in argv if a]
            parent, ticks = _proc_stat(pid)
            if "dvc" in words and ("repro" in words or "exp" in words):
                boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                            if line.startswith("btime "))
                started = boot + ticks / os.sysconf("SC_CLK_TCK")
                return f"repro-{time.strftime('%Y%m%d-%H%M%S', time.localtime(started))}-{pid}"
            pid = parent
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return None


def _secret_values() -> set[str]:
    return {v for k, v in os.environ.items() if SECRET_ENV.search(k) and len(v) >= 8}


def scrub(value: Any, _secrets: set[str] | None = None) -> Any:
    """A copy of ``value`` with secret-looking keys and any environment secret redacted."""
    secrets = _secret_values() if _secrets is None else _secrets
    if isinstance(value, dict):
        return {
            k: (REDACTED if SECRET_KEY.search(str(k)) and not str(k).endswith("_env") else scrub(v, secrets))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return redact_keys(value)
    return value


def redact_values(value: Any) -> Any:
    """A copy of ``value`` (metrics, reports) with key-looking strings and environment secrets redacted;
    key names are kept (``prompt_tokens`` is a count, not a token)."""
    secrets = _secret_values()

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return scrub(item, secrets) if isinstance(item, str) else item

    return walk(value)


def wandb_mode() -> str:
    """``online`` when the user configured W&B, ``disabled`` when asked, else ``offline``."""
    mode = os.environ.get("WANDB_MODE")
    if mode:
        return mode
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


class StageRun:
    """Handle given to a stage: ``log_metrics`` goes to the W&B run (if any) as summary values."""

    def __init__(self, run: Any | None):
        self.run = run

    def log_metrics(self, metrics: dict[str, Any], prefix: str = "") -> None:
        flat = _flatten(metrics, prefix)
        if self.run is not None:
            self.run.log(flat)
            for key, value in flat.items():
                self.run.summary[key] = value


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}/"))
        elif isinstance(value, (int, float, bool)):
            out[name] = value
    return out


@contextmanager
def stage_run(
    stage: str, params: dict[str, Any], *, project: str | None = None, group: str | None = None, name: str | None = None
) -> Iterator[StageRun]:
    """Open one W&B run for ``stage`` with scrubbed ``params``; tracking never breaks a stage.

    ``group`` defaults to ``DVC_EXP_NAME``, else the group of the ``dvc repro`` running the stage
    (:func:`dvc_repro_group`); ``name`` to ``<stage>-<DVC_EXP_NAME>``.

    Set ``EDUMAS_TRACKING=0`` to switch tracking off entirely (the tests do).
    """
    if os.environ.get("EDUMAS_TRACKING", "1") == "0" or wandb_mode() == "disabled":
        yield StageRun(None)
        return
    run = None
    try:
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        run = wandb.init(
            project=project or os.environ.get("WANDB_PROJECT", "edumas"),
            job_type=stage,
            group=group or os.environ.get("DVC_EXP_NAME") or dvc_repro_group(),
            name=name or (f"{stage}-{os.environ['DVC_EXP_NAME']}" if os.environ.get("DVC_EXP_NAME") else None),
            config=scrub(params),
            mode=wandb_mode(),
            reinit="finish_previous",
        )
    except Exception as exc:  # tracking must never stop the pipeline
        log.warning("W&B tracking disabled for stage %s: %s", stage, exc)
        run = None
    try:
        yield StageRun(run)
    finally:
        if run is not None:
            run.finish()
