"""Sharded generation: one generate stage split over many machines (a Slurm array), merged later.

Every team config has ``shard: {index: 0, count: 1}``; ``--shard i/n`` on a generate stage sets
it. The harness keeps a shard's samples out of the list one run would use (after the seeded
sampling, so a shard never depends on ``count``-dependent details): sample ``p`` belongs to shard
``p % count``, or, when the team names a group per sample (samples sharing work, e.g. the tagging
team's one plan per concept), group ``g`` (numbered in order of first appearance) belongs to
shard ``g % count``. With ``count > 1`` every output of the shard goes to
``<generated_dir>/shards/<index>-of-<count>/`` and ``<reports_dir>/shards/<index>-of-<count>/``,
so shards on a shared filesystem never collide, and the shard's ``shard.json`` (written last:
its presence says the shard is complete) records what :mod:`pipelines.agents.merge` needs: the
positions of its samples in the whole run, rows per sample per file, the per-system counters, the
raw usage before and during the harness run, the params fingerprint, and the team's context (the
parts that are not per-sample, which must agree across shards, and counters that add up).

    shard = ShardConfig.parse("2/3")                  # ShardConfig(index=2, count=3)
    outputs = shard.outputs(cfg.outputs, root)        # the shard's folders (unchanged for 1/1)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from pipelines.agents.outputs import GenerationOutputs
from pipelines.config import StrictModel
from pipelines.io import write_json_atomic

MANIFEST = "shard.json"
UNFINGERPRINTED = ("shard", "progress", "concurrency")  # top-level keys that never change results


class ShardConfig(StrictModel):
    """Which part of a generate stage's samples this run does: shard ``index`` of ``count``."""

    index: int = Field(0, ge=0, description="this shard (0-based, below count)")
    count: int = Field(1, ge=1, description="number of shards the samples are split into")

    @model_validator(mode="after")
    def _index_below_count(self) -> ShardConfig:
        if self.index >= self.count:
            raise ValueError(
                f"shard.index must be below shard.count (got index {self.index}, count {self.count}); "
                f"shards are numbered 0..{self.count - 1}, e.g. --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT"
            )
        return self

    @classmethod
    def parse(cls, text: str) -> ShardConfig:
        """``"i/n"`` -> ``ShardConfig(index=i, count=n)``; ValueError saying the form otherwise."""
        index, sep, count = str(text).partition("/")
        if not sep or not index.strip().isdigit() or not count.strip().isdigit():
            raise ValueError(f"--shard takes INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/4 (got {text!r})")
        try:
            return cls(index=int(index), count=int(count))
        except ValidationError as exc:
            raise ValueError("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None

    @property
    def active(self) -> bool:
        return self.count > 1

    @property
    def folder(self) -> str:
        return shard_folder(self.index, self.count)

    def positions(self, n_items: int, groups: Sequence[Hashable] | None = None) -> list[int]:
        """Positions (in the whole run's sample list) of this shard's samples, in order."""
        if groups is None:
            return [p for p in range(n_items) if p % self.count == self.index]
        numbers: dict[Hashable, int] = {}
        for group in groups:
            numbers.setdefault(group, len(numbers))
        return [p for p, group in enumerate(groups) if numbers[group] % self.count == self.index]

    def outputs(self, outputs: BaseModel, root: Path | str = ".") -> Any:
        """``outputs`` (a GenerationOutputs) under ``root``, moved into this shard's folders when active."""
        root = Path(root)
        generated, reports = root / outputs.generated_dir, root / outputs.reports_dir
        if self.active:
            generated, reports = generated / self.folder, reports / self.folder
        return GenerationOutputs(generated_dir=str(generated), reports_dir=str(reports))


def shard_folder(index: int, count: int) -> str:
    return f"shards/{index}-of-{count}"


def params_fingerprint(*configs: BaseModel) -> str:
    """sha256 of the configs that decide a run's results (shard, progress, concurrency and
    ``llm.cache`` left out, so each shard may name its own cache)."""
    dumps = []
    for cfg in configs:
        data = cfg.model_dump(mode="json")
        for key in UNFINGERPRINTED:
            data.pop(key, None)
        if isinstance(data.get("llm"), dict):
            data["llm"].pop("cache", None)
        dumps.append(data)
    return hashlib.sha256(json.dumps(dumps, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def roundtrip(value: Any) -> Any:
    """``value`` as it reads back from JSON (what the merge sees; the run uses the same form)."""
    return json.loads(json.dumps(value, ensure_ascii=False))


def write_manifest(
    shard: ShardConfig,
    outputs: Any,
    report: Any,
    *,
    fingerprint: str,
    context: dict[str, Any],
    counters: dict[str, Any] | None = None,
    shared: Sequence[str] = (),
) -> Path | None:
    """Write ``<reports_dir>/shard.json`` for an active shard (nothing for ``count == 1``).

    ``report`` is the :class:`HarnessReport` of the sharded harness run; ``context`` the team's
    values that are not per sample (JSON; every shard must have the same); ``counters`` nested
    numbers that add up over shards; ``shared`` files (paths relative to the folders, prefixed
    ``generated:`` or ``reports:``) every shard writes alike, taken from shard 0 by the merge
    (those prefixed ``=`` must also be byte-identical across shards).
    """
    if not shard.active:
        return None
    path = Path(outputs.reports_dir) / MANIFEST
    manifest = {
        "index": shard.index,
        "count": shard.count,
        "fingerprint": fingerprint,
        "total_items": report.total_items,
        "positions": report.positions,
        "row_counts": report.row_counts,
        "systems": {name: system.state() for name, system in report.systems.items()},
        "written": report.written,
        "samples": report.samples,
        "failed_samples": report.failed_samples,
        "wall_s": report.wall_s,
        "peak_concurrency": report.peak_concurrency,
        "usage_before": report.usage_before,
        "usage_delta": report.usage_delta,
        "context": roundtrip(context),
        "counters": roundtrip(counters or {}),
        "shared": {name: _digest(outputs, name) for name in shared},
    }
    write_json_atomic(path, manifest)
    return path


def shared_path(outputs: Any, name: str) -> Path:
    """The file a ``shared`` entry (``[=]generated:rel`` or ``[=]reports:rel``) names under ``outputs``."""
    base, _, rel = name.lstrip("=").partition(":")
    folder = {"generated": outputs.generated_dir, "reports": outputs.reports_dir}[base]
    return Path(folder) / rel


def _digest(outputs: Any, name: str) -> str | None:
    path = shared_path(outputs, name)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
