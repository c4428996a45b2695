"""Resume from the last complete checkpoint of the same run; never from another run's, and never delete one.

``<output_dir>/checkpoints`` is not a DVC out (dvc.yaml), so DVC never deletes it and ``dvc repro`` keeps it. Each run
stores its fingerprint and the parts it hashes (:func:`fingerprint_parts`: its params, minus the ones that
only say how long or how often; the dataset's content hash; the base model; the chat template; the world
size, since the number of processes sets the effective batch, the data order and how ZeRO shards the
optimizer states). A later launch:

- same fingerprint: resumes from the newest checkpoint holding ``trainer_state.json`` (written last, so a
  checkpoint cut short by a kill is skipped);
- only the number of processes differs (a preempted multi-node job relaunched on other nodes): refuses,
  saying how many processes resume it and how to start fresh instead; hours of training stay usable;
- params, data, model or template differ, or ``resume: never``: a new run from step 0; the earlier
  checkpoints are moved aside to ``checkpoints/superseded/<time>-<old fingerprint>/`` with a note of why
  (remove them by hand when no longer needed).

:func:`plan_resume` only reads, so every rank can decide before the main process moves anything
(:func:`apply_resume_plan`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.io import write_json_atomic

log = logging.getLogger(__name__)

FINGERPRINT_FILE = "run_fingerprint.json"
SUPERSEDED_DIR = "superseded"
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# Keys that may change between a killed run and its restart without invalidating its checkpoints.
RESUMABLE_KEYS = {
    "max_steps",
    "num_train_epochs",
    "save_steps",
    "save_total_limit",
    "logging_steps",
    "eval_steps",
    "per_device_eval_batch_size",
    "merge",
    "reports_dir",
    "data_card",
    "lm_head_tolerance",
}


class ResumeRefused(RuntimeError):
    """The checkpoints belong to this run but cannot be resumed by this launch; the message says both ways on."""


def dataset_hash(dataset_dir: Path | str) -> str:
    """SHA-256 over the dataset's Arrow files (names and bytes), in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(Path(dataset_dir).rglob("*.arrow")):
        digest.update(str(path.relative_to(dataset_dir)).encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def fingerprint_parts(
    params: dict[str, Any], data_sha256: str, model_sha256: str = "", template_sha256: str = "", *, world_size: int = 1
) -> dict[str, Any]:
    """What a checkpoint must match to be resumed, part by part (params hashed, less resumable keys)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in RESUMABLE_KEYS and k != "tracking"}
        return value

    params_sha = hashlib.sha256(json.dumps(strip(params), sort_keys=True, default=str).encode()).hexdigest()
    return {"params": params_sha, "data": data_sha256, "model": model_sha256, "template": template_sha256,
            "world_size": world_size}  # fmt: skip


def fingerprint_of(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def run_fingerprint(
    params: dict[str, Any], data_sha256: str, model_sha256: str = "", template_sha256: str = "", *, world_size: int = 1
) -> str:
    """The hash of :func:`fingerprint_parts`."""
    return fingerprint_of(fingerprint_parts(params, data_sha256, model_sha256, template_sha256, world_size=world_size))


def complete_checkpoints(folder: Path) -> list[Path]:
    """Checkpoint folders holding ``trainer_state.json``, oldest first."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and CHECKPOINT.match(p.name)]
    found = [p for p in found if (p / "trainer_state.json").exists()]
    return sorted(found, key=lambda p: int(CHECKPOINT.match(p.name).group(1)))


def checkpoint_step(checkpoint: Path) -> int:
    return int(json.loads((checkpoint / "trainer_state.json").read_text())["global_step"])


@dataclass
class ResumePlan:
    """What this launch does with ``folder``: resume from ``checkpoint``, or move ``stale`` aside and start at 0."""

    folder: Path
    parts: dict[str, Any]
    checkpoint: Path | None = None
    stale: list[Path] = field(default_factory=list)
    reason: str = ""
    stored: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.parts)


def _changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [key for key in new if key in old and old[key] != new[key]]


def plan_resume(folder: Path, parts: dict[str, Any], mode: str) -> ResumePlan:
    """Decide without writing anything (every rank calls it); raises :class:`ResumeRefused` (see module docstring)."""
    stored: dict[str, Any] = {}
    if (folder / FINGERPRINT_FILE).exists():
        stored = json.loads((folder / FINGERPRINT_FILE).read_text())
    plan = ResumePlan(folder=folder, parts=parts, stored=stored)
    checkpoints = complete_checkpoints(folder)
    same = stored.get("fingerprint") == plan.fingerprint
    if mode == "auto" and checkpoints and same:
        plan.checkpoint = checkpoints[-1]
        return plan
    old_parts = stored.get("parts") or {}
    changed = _changed(old_parts, parts)
    if mode == "auto" and checkpoints and changed == ["world_size"]:
        step = checkpoint_step(checkpoints[-1])
        raise ResumeRefused(
            f"{folder} holds {checkpoints[-1].name} (step {step}) of this same run, written by "
            f"{old_parts['world_size']} training process(es); this launch has {parts['world_size']}. A checkpoint "
            f"resumes only on the number of processes that wrote it: relaunch with {old_parts['world_size']} "
            f"processes (accelerate --num_processes / nodes x GPUs per node) to continue from step {step}, or set "
            f"resume: never in the run's params to move those checkpoints to {folder / SUPERSEDED_DIR} and start "
            "from step 0"
        )
    plan.stale = sorted(p for p in folder.glob("checkpoint-*") if p.is_dir()) if folder.is_dir() else []
    if mode == "never":
        plan.reason = "resume: never"
    elif changed:
        plan.reason = f"the run changed ({', '.join(changed)})"
    else:
        plan.reason = "the params, data, model or number of processes changed" if stored else "no run fingerprint"
    return plan


def apply_resume_plan(plan: ResumePlan) -> Path | None:
    """Main process only: move stale checkpoints aside (never delete), record the fingerprint; the resume point."""
    if plan.checkpoint is not None:
        log.info("resuming from %s (global step %d)", plan.checkpoint, checkpoint_step(plan.checkpoint))
        return plan.checkpoint
    if plan.stale:
        old = plan.stored.get("fingerprint") or "unknown"
        dest = plan.folder / SUPERSEDED_DIR / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{old[:12]}"
        dest.mkdir(parents=True, exist_ok=True)
        for path in plan.stale:
            os.replace(path, dest / path.name)
        note = {"reason": plan.reason, "moved": [p.name for p in plan.stale], "run": plan.stored,
                "superseded_by": {"fingerprint": plan.fingerprint, "parts": plan.parts}}  # fmt: skip
        write_json_atomic(dest / "SUPERSEDED.json", note)
        log.warning(
            "starting from step 0 (%s): moved %d checkpoint(s) to %s; move them back to resume that run with its "
            "own params, or delete the folder when no longer needed", plan.reason, len(plan.stale), dest,
        )  # fmt: skip
    write_json_atomic(plan.folder / FINGERPRINT_FILE, {"fingerprint": plan.fingerprint, "parts": plan.parts})
    return None


def resolve_resume(folder: Path, parts: dict[str, Any], mode: str, *, is_main: bool = True) -> Path | None:
    """:func:`plan_resume` then (main process) :func:`apply_resume_plan`, for one process."""
    plan = plan_resume(folder, parts, mode)
    if is_main:
        return apply_resume_plan(plan)
    return plan.checkpoint
