"""How the generation harness writes a run: each finished sample's prediction row, trace rows and
exported rows appended to temporary files (:class:`JsonlStream`) and counted per system
(:class:`SampleWriter`); committed (renamed into place) at the end, or discarded with an earlier
run's outputs when the run fails."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pipelines.agents.harness_report import System, SystemReport
from pipelines.agents.outputs import GenerationOutputs
from pipelines.agents.runner import SampleOutcome
from pipelines.io import forget_temporary, temporary_sibling

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741


class JsonlStream:
    """Rows appended to a temporary sibling of ``path``; ``commit()`` renames it into place. Opening it
    removes the temporaries a SIGKILLed run of the stage left beside ``path``."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        fd, self._tmp = temporary_sibling(self.path)  # a killed run's leftovers removed, a plain file's mode
        self._handle = os.fdopen(fd, "w", encoding="utf-8")
        self.rows = 0

    def write(self, row: dict[str, Any]) -> None:
        self._handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.rows += 1

    def commit(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        os.replace(self._tmp, self.path)
        forget_temporary(self._tmp)

    def discard(self) -> None:
        if not self._handle.closed:
            self._handle.close()
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)
        forget_temporary(self._tmp)


@dataclass
class ShardPlan(Generic[I]):
    """The samples one run (or shard) runs: ``items`` at ``positions`` of the whole run's
    ``total_items``, with the fixed predictions of those samples."""

    items: list[I]
    fixed: dict[str, list[Any]]
    positions: list[int]
    total_items: int


def count_trace_row(report: SystemReport, row: dict[str, Any]) -> bool:
    """Add an LLM step's replies and unparseable ones to ``report`` (a ``shared`` row, reused from
    another sample, is not counted again); True when the row is an LLM call that failed for good."""
    if row.get("prompt") is not None and not row.get("shared"):
        counts = report.agents[row["agent"]]
        counts["replies"] += len(row.get("replies") or ([row["reply"]] if row.get("reply") is not None else []))
        counts["unparseable"] += row.get("unparseable", 0)
    if row.get("error_kind") == "llm":
        report.note_error("llm", row["error"])
        return True
    return False


class SampleWriter:
    """Streams each finished sample's rows (prediction row, trace rows, exported rows) to the
    temporary files of ``outputs`` and counts it in the per-system reports; :meth:`commit` renames
    the files into place, :meth:`discard` removes them (and an earlier run's outputs)."""

    def __init__(
        self,
        plan: ShardPlan,
        systems: Sequence[System],
        *,
        outputs: GenerationOutputs,
        prediction_row: Callable[[Any, dict[str, Any]], dict[str, Any]],
        exports: dict[str, Callable[[Any, dict[str, Any]], Iterable[dict[str, Any]]]],
        order: Sequence[str] | None,
    ) -> None:
        self.plan, self.systems, self.prediction_row, self.exports = plan, systems, prediction_row, exports
        self.names = list(order or [*plan.fixed, *(s.name for s in systems)])
        self.reports = {s.name: SystemReport(s.name) for s in systems}
        self.generated, self.reports_dir = Path(outputs.generated_dir), Path(outputs.reports_dir)
        files = ["predictions.jsonl", "traces.jsonl", *exports]
        self.streams = {file: JsonlStream(self.generated / file) for file in files}
        self.row_counts: dict[str, list[int]] = {}
        self.failed_samples = 0

    def on_done(self, outcome: SampleOutcome) -> None:
        """Write ``outcome`` and record the rows it gave per file (a shard's manifest keeps them)."""
        before = {file: stream.rows for file, stream in self.streams.items()}
        self.write_sample(outcome)
        for file, stream in self.streams.items():
            self.row_counts.setdefault(file, []).append(stream.rows - before[file])

    def write_sample(self, outcome: SampleOutcome) -> None:
        item = self.plan.items[outcome.index]
        results: dict[str, Any] = {}
        sample_failed = outcome.result is None
        for system, (result, error, rows) in zip(self.systems, outcome.result or [], strict=False):
            sample_failed = self.record_system(system, result, error=error, rows=rows) or sample_failed
            results[system.name] = result
        self.failed_samples += sample_failed
        values = {name: self.plan.fixed[name][outcome.index] for name in self.plan.fixed}
        values.update({name: self.reports[name].predictions[-1] for name in self.reports})
        row = self.prediction_row(item, {n: values[n] for n in self.names if n in values})
        self.streams["predictions.jsonl"].write(row)
        for file, build in self.exports.items():
            for row in build(item, results):
                self.streams[file].write(row)

    def record_system(self, system: System, result: Any, *, error: str | None, rows: list[dict[str, Any]]) -> bool:
        """Write one system's trace rows and count its sample; True when the sample failed for it."""
        report = self.reports[system.name]
        report.samples += 1
        failed = error is not None
        if error is not None:
            report.note_error(error.split(":", 1)[0], error)
        for row in rows:
            self.streams["traces.jsonl"].write(row)
            failed = count_trace_row(report, row) or failed
        report.failed_samples += failed
        report.failed_subtasks += system.failed_subtasks(result)
        report.predictions.append(system.prediction(result))
        return failed

    def discard(self) -> None:
        for stream in self.streams.values():
            stream.discard()
        remove_earlier_outputs([s.path for s in self.streams.values()], self.reports_dir)

    def commit(self) -> None:
        for stream in self.streams.values():
            stream.commit()


def remove_earlier_outputs(files: Iterable[Path], reports_dir: Path) -> None:
    """Remove ``files`` and the reports an earlier run left (a failed run leaves no stale file)."""
    for path in [*files, reports_dir / "failures.json", reports_dir / "usage.json"]:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove %s from an earlier run: %s", path, exc)
