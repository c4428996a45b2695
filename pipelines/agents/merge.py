"""Merge the shards of a generate stage into the files one run writes (see :mod:`pipelines.agents.shards`).

    merged = merge_shard_outputs(outputs, fingerprint=params_fingerprint(cfg))
    metrics = finish(cfg, outputs, merged.report, context=merged.context, counters=merged.counters)

:func:`merge_shard_outputs` reads every shard's ``shard.json`` under ``<reports_dir>/shards/``
and checks that all ``count`` shards are there, complete (the manifest is written last), from the
same params (fingerprint) and covering every sample exactly once, with the same team context, and
that each shard file has the rows its manifest counts; nothing is written before. It then writes
into ``outputs`` (the folders one run writes): every streamed JSONL file with the rows in the
order of one run (the lines copied byte for byte, sample by sample), the shared files taken from
shard 0 (those marked ``=`` checked identical first), ``usage.json`` (shard 0's usage before its
harness run, e.g. RAM2C's topic phase, plus every shard's usage during it) and ``failures.json``.
It returns the merged :class:`HarnessReport` and the context and added-up counters, from which the
team's own finishing function recomputes the metrics and reports.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.agents.harness import GenerationOutputs, HarnessReport, SystemReport
from pipelines.agents.shards import MANIFEST, shard_folder, shared_path
from pipelines.io import atomic_open, write_json_atomic
from pipelines.llm.accounting import accounting_from, usage_sum
from pipelines.stage import StageError


class ShardMergeError(StageError):
    """Shards that cannot be merged (missing, incomplete, from other params); the message says which."""


@dataclass
class MergedShards:
    report: HarnessReport
    context: dict[str, Any]
    counters: dict[str, Any]
    count: int


def shard_outputs(outputs: GenerationOutputs, index: int, count: int) -> GenerationOutputs:
    folder = shard_folder(index, count)
    return GenerationOutputs(
        generated_dir=str(Path(outputs.generated_dir) / folder), reports_dir=str(Path(outputs.reports_dir) / folder)
    )


def find_count(outputs: GenerationOutputs) -> int:
    """The shard count of the shard folders under ``<reports_dir>/shards`` (exactly one must be there)."""
    base = Path(outputs.reports_dir) / "shards"
    counts = sorted({int(m.group(2)) for p in base.glob("*-of-*") if (m := re.fullmatch(r"(\d+)-of-(\d+)", p.name))})
    if not counts:
        raise ShardMergeError(f"no shard folders under {base}; run the stage with --shard INDEX/COUNT first")
    if len(counts) > 1:
        raise ShardMergeError(f"shard folders of several counts under {base} ({counts}); pass --count")
    return counts[0]


def read_manifests(outputs: GenerationOutputs, count: int, *, fingerprint: str) -> list[dict[str, Any]]:
    """Every shard's manifest, checked: present, same count and params, the samples covered once."""
    manifests, missing = [], []
    for index in range(count):
        path = Path(shard_outputs(outputs, index, count).reports_dir) / MANIFEST
        if not path.exists():
            missing.append(f"shard {index}/{count} ({path} missing: not run or not finished)")
            continue
        manifests.append(json.loads(path.read_text(encoding="utf-8")))
    if missing:
        raise ShardMergeError(
            "cannot merge: "
            + "; ".join(missing)
            + "; rerun each with --shard INDEX/COUNT (finished LLM calls are cached)"
        )
    for index, manifest in enumerate(manifests):
        if manifest["index"] != index or manifest["count"] != count:
            raise ShardMergeError(f"shard {index}/{count}: its manifest says {manifest['index']}/{manifest['count']}")
        if manifest["fingerprint"] != fingerprint:
            raise ShardMergeError(
                f"shard {index}/{count} ran with other params than the merge reads (fingerprint "
                f"{manifest['fingerprint'][:12]} != {fingerprint[:12]}); rerun it, or merge with its params file"
            )
        if manifest["total_items"] != manifests[0]["total_items"]:
            raise ShardMergeError(
                f"shard {index}/{count} ran over {manifest['total_items']} samples, shard 0 over "
                f"{manifests[0]['total_items']}: the input data changed between the shards; rerun them"
            )
        differing = sorted(
            k
            for k in set(manifest["context"]) | set(manifests[0]["context"])
            if manifest["context"].get(k) != manifests[0]["context"].get(k)
        )
        if differing:
            raise ShardMergeError(
                f"shard {index}/{count} differs from shard 0 in {', '.join(differing)} (computed by every shard "
                "before its samples; a nondeterministic step, e.g. a baseline trained on other hardware); rerun "
                "the shards on one kind of machine"
            )
    positions = sorted(p for m in manifests for p in m["positions"])
    if positions != list(range(manifests[0]["total_items"])):
        raise ShardMergeError(f"the {count} shards do not cover the {manifests[0]['total_items']} samples exactly once")
    return manifests


def _lines(path: Path) -> Iterator[str]:
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        yield from handle


def merge_jsonl(outputs: GenerationOutputs, manifests: list[dict[str, Any]], file: str) -> int:
    """Write ``<generated_dir>/<file>`` from the shards' files in the order of one run; returns rows."""
    count = len(manifests)
    owner = {p: (k, j) for k, m in enumerate(manifests) for j, p in enumerate(m["positions"])}
    readers = [_lines(Path(shard_outputs(outputs, k, count).generated_dir) / file) for k in range(count)]
    rows = 0
    with atomic_open(Path(outputs.generated_dir) / file) as out:
        for position in range(len(owner)):
            k, j = owner[position]
            for _ in range(manifests[k]["row_counts"][file][j]):
                line = next(readers[k], None)
                if line is None:
                    raise ShardMergeError(f"shard {k}/{count}: {file} has fewer rows than its manifest says")
                out.write(line)
                rows += 1
        for k, reader in enumerate(readers):
            if next(reader, None) is not None:
                raise ShardMergeError(f"shard {k}/{count}: {file} has more rows than its manifest says")
    return rows


def check_shards_files(outputs: GenerationOutputs, manifests: list[dict[str, Any]]) -> None:
    """Before anything is written: every shard's files have the rows its manifest counts, and the
    shared files marked ``=`` are identical in every shard."""
    count = len(manifests)
    for k, manifest in enumerate(manifests):
        folder = Path(shard_outputs(outputs, k, count).generated_dir)
        for file, counts in manifest["row_counts"].items():
            rows = sum(1 for _ in _lines(folder / file))
            if rows != sum(counts):
                raise ShardMergeError(
                    f"shard {k}/{count}: {file} has {'fewer' if rows < sum(counts) else 'more'} rows ({rows}) than "
                    f"its manifest says ({sum(counts)}); rerun the shard"
                )
    for name, digest in manifests[0]["shared"].items():
        if name.startswith("="):
            differing = [k for k, m in enumerate(manifests) if m["shared"].get(name) != digest]
            if differing:
                raise ShardMergeError(
                    f"{name[1:]} differs between shard 0 and shards {differing} of {count}: shards must compute it "
                    "alike (same params, data and models; share the LLM cache, or rerun the shards)"
                )


def copy_shared(outputs: GenerationOutputs, manifests: list[dict[str, Any]]) -> None:
    """Shard 0's shared files into ``outputs``."""
    for name in manifests[0]["shared"]:
        source = shared_path(shard_outputs(outputs, 0, len(manifests)), name)
        if source.exists():
            target = shared_path(outputs, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {k: _add(a.get(k, 0), b.get(k, 0)) for k in list(a) + [k for k in b if k not in a]}
    return a + b


def merge_shard_outputs(outputs: GenerationOutputs, *, fingerprint: str, count: int | None = None) -> MergedShards:
    """Check the shards and write the merged files into ``outputs`` (see the module docstring)."""
    count = count or find_count(outputs)
    manifests = read_manifests(outputs, count, fingerprint=fingerprint)
    check_shards_files(outputs, manifests)
    written = {file: merge_jsonl(outputs, manifests, file) for file in manifests[0]["row_counts"]}
    copy_shared(outputs, manifests)
    usage = accounting_from(usage_sum([manifests[0]["usage_before"], *(m["usage_delta"] for m in manifests)]))
    systems = {}
    for name in manifests[0]["systems"]:
        systems[name] = SystemReport.from_states(name, [m["systems"][name] for m in manifests])
        systems[name].usage = usage.scope_summary(name)
    report = HarnessReport(
        systems,
        written,
        sum(m["samples"] for m in manifests),
        sum(m["failed_samples"] for m in manifests),
        max(m["wall_s"] for m in manifests),
        max(m["peak_concurrency"] for m in manifests),
        total_items=manifests[0]["total_items"],
        positions=list(range(manifests[0]["total_items"])),
    )
    counters: dict[str, Any] = {}
    for manifest in manifests:
        counters = _add(counters, manifest["counters"]) if counters else dict(manifest["counters"])
    reports_dir = Path(outputs.reports_dir)
    write_json_atomic(reports_dir / "usage.json", usage.report())
    write_json_atomic(reports_dir / "failures.json", report.failure_summary())
    return MergedShards(report, manifests[0]["context"], counters, count)
