"""What each saved checkpoint carries besides the Trainer's files: plain modes and the LM-head probe record.

The Trainer writes checkpoints with safetensors (files 0600, unreadable by a second user):
:class:`CheckpointRecords` gives every file under ``checkpoints/`` the modes of a plain write after each save,
and stores the run's LM-head probe result (:mod:`pipelines.training.head_probe`) as ``lm_head_probe.json`` in
the checkpoint. A relaunch that takes no step (the checkpoint already holds ``max_steps``) reads the record
back with :func:`saved_probe` instead of reporting no probe.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from pipelines.io import apply_umask_modes, write_json_atomic

PROBE_FILE = "lm_head_probe.json"


class CheckpointRecords(TrainerCallback):
    """After every save (main process): the probe record into the checkpoint, then plain modes on the folder."""

    def __init__(self, probe) -> None:
        self.probe = probe

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return control
        folder = Path(args.output_dir)
        checkpoint = folder / f"checkpoint-{state.global_step}"
        if checkpoint.is_dir() and self.probe.result is not None:
            write_json_atomic(checkpoint / PROBE_FILE, self.probe.result)
        if folder.is_dir():
            apply_umask_modes(folder)
        return control


def saved_probe(checkpoint: Path | None, previous_metrics: Path) -> dict[str, Any] | None:
    """The probe record of a run that took no step: the checkpoint's, else the one in the last ``metrics.json``."""
    for path, key in ((checkpoint / PROBE_FILE if checkpoint else None, None), (previous_metrics, "lm_head")):
        if path is None or not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        record = data.get(key) if key and isinstance(data, dict) else data
        if isinstance(record, dict):
            return record
    return None
