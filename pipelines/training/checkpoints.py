"""Resume from the last complete checkpoint of the same run; never from another run's checkpoints.

``<output_dir>/checkpoints`` is a DVC ``persist: true`` out, so it survives ``dvc repro``. Each run
stores a fingerprint (hash of its params, minus the ones that only say how long or how often, plus
the dataset's content hash, the base model, the chat template and the world size: the number of
processes sets the effective batch, the data order and how ZeRO shards optimizer states, so a
checkpoint written on 8 GPUs is not resumed on 4). A later run with the same fingerprint resumes from the newest
checkpoint that holds ``trainer_state.json`` (written last, so a checkpoint cut short by a kill is
skipped); a different fingerprint starts from step 0 and removes the stale checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

from pipelines.io import write_json_atomic

log = logging.getLogger(__name__)

FINGERPRINT_FILE = "run_fingerprint.json"
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
}


def dataset_hash(dataset_dir: Path | str) -> str:
    """SHA-256 over the dataset's Arrow files (names and bytes), in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(Path(dataset_dir).rglob("*.arrow")):
        digest.update(str(path.relative_to(dataset_dir)).encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def run_fingerprint(
    params: dict[str, Any], data_sha256: str, model_sha256: str = "", template_sha256: str = "", *, world_size: int = 1
) -> str:
    """What a checkpoint must match to be resumed: params (less resumable keys), data, base model, chat
    template and the number of training processes."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in RESUMABLE_KEYS and k != "tracking"}
        return value

    blob = json.dumps(
        {
            "params": strip(params),
            "data": data_sha256,
            "model": model_sha256,
            "template": template_sha256,
            "world_size": world_size,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def complete_checkpoints(folder: Path) -> list[Path]:
    """Checkpoint folders holding ``trainer_state.json``, oldest first."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and CHECKPOINT.match(p.name)]
    found = [p for p in found if (p / "trainer_state.json").exists()]
    return sorted(found, key=lambda p: int(CHECKPOINT.match(p.name).group(1)))


def checkpoint_step(checkpoint: Path) -> int:
    return int(json.loads((checkpoint / "trainer_state.json").read_text())["global_step"])


def resolve_resume(folder: Path, fingerprint: str, mode: str, *, is_main: bool = True) -> Path | None:
    """The checkpoint to resume from, or None to start at step 0 (stale checkpoints are removed)."""
    stored = None
    if (folder / FINGERPRINT_FILE).exists():
        stored = json.loads((folder / FINGERPRINT_FILE).read_text()).get("fingerprint")
    checkpoints = complete_checkpoints(folder)
    if mode == "auto" and checkpoints and stored == fingerprint:
        log.info("resuming from %s (global step %d)", checkpoints[-1], checkpoint_step(checkpoints[-1]))
        return checkpoints[-1]
    if is_main:
        stale = [p for p in folder.glob("checkpoint-*") if p.is_dir()] if folder.is_dir() else []
        if stale:
            reason = "resume: never" if mode == "never" else "the params, data, model or number of processes changed"
            log.warning("removing %d checkpoint(s) in %s: %s", len(stale), folder, reason)
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
        write_json_atomic(folder / FINGERPRINT_FILE, {"fingerprint": fingerprint})
    return None
