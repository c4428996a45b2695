"""The generation harness: one or more systems over the same samples, outputs streamed to disk.

A team module holds only its method (agents, prompts, parsers, flow, scorer); the harness runs it::

    systems = [System("team", team_worker, prediction=lambda v: int(v.verdict) if v else 0),
               System("single_llm", single_worker)]
    report = await run_systems(
        examples, systems, accounting=runtime.accounting, outputs=cfg.outputs,
        sample_id=lambda e: e.id, concurrency=cfg.concurrency,
        prediction_row=lambda e, preds: {"id": e.id, "label": e.label, "predictions": preds},
        exports={"sft.jsonl": lambda e, results: my_sft_rows(e, results["team"])},
        max_failed_share=cfg.max_failed_share)
    report.systems["team"].predictions      # one small value per sample, in input order

One :class:`Runner` (one concurrency limit) runs every system of a sample concurrently, each in
its own usage scope (``usage.json`` has per-system usage without any role table). As samples
finish (delivered in input order) their prediction row, trace rows (``system`` added) and exported
rows are appended to ``<generated_dir>/predictions.jsonl``, ``traces.jsonl`` and each export file;
nothing but the small per-system predictions stays in memory. At the end the files are renamed
into place (atomic), ``<reports_dir>/usage.json`` and ``failures.json`` are written, and one
summary line is logged. A sample *failed* for a system when its worker raised or one of its LLM
calls failed for good (an unparseable reply is not a failure; it is counted per agent; a trace
row marked ``shared=True``, a record reused from another sample, is not counted again). More
failed samples than ``max_failed_share`` raises :class:`FailureBudgetExceeded` after writing the
outputs; so does a run with more unparseable replies than ``max_unparseable_share`` of all its
systems' replies (a server that ignores the schemas it is sent: every sample "succeeds" with nothing
in it; 1.0, the default here, checks nothing; the generate stages pass their section's value).
A run that fails or is cancelled before its end removes the outputs an earlier run left in its
folders (predictions, traces, exports, failures.json, usage.json), so no stale file sits beside the
error. The harness never closes the runtime whose accounting it is given. ``shard=`` runs one
shard's samples only and records what a merge needs (:mod:`pipelines.agents.shards`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pipelines.agents.outputs import GenerationOutputs
from pipelines.agents.runner import Runner, RunReport, SampleOutcome, SampleTrace
from pipelines.agents.shards import ShardConfig
from pipelines.io import forget_temporary, temporary_sibling, write_json_atomic
from pipelines.llm.accounting import Accounting, usage_delta, usage_scope, usage_snapshot
from pipelines.stage import StageError

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741
R = TypeVar("R")


class FailureBudgetExceeded(StageError):
    """More samples failed than ``max_failed_share`` allows; the outputs and failures.json are written."""


class UnparseableBudgetExceeded(FailureBudgetExceeded):
    """Most replies of a system did not parse (more than ``max_unparseable_share``); outputs are written."""


class EmptyEvaluation(StageError):
    """A run with no samples (the data, filters or limit leave none)."""


def _no_failures(result: Any) -> int:
    return 0


@dataclass
class System(Generic[I, R]):
    """One system run over every sample.

    ``worker(item, trace) -> result`` (the team worker contract); ``prediction(result)`` is the small
    value kept per sample and written in the prediction row (``result`` is None when the worker
    raised); ``failed_subtasks(result)`` counts failed sub-tasks inside one result.
    """

    name: str
    worker: Callable[[I, SampleTrace], Awaitable[R]]
    prediction: Callable[[R | None], Any] = lambda result: result
    failed_subtasks: Callable[[R | None], int] = _no_failures


@dataclass
class SystemReport:
    """Per-system counts: samples, failed samples, failed sub-tasks, replies and unparseable per agent,
    errors by kind with their first message, the scope's usage, and the predictions in input order."""

    name: str
    predictions: list[Any] = field(default_factory=list)
    samples: int = 0
    failed_samples: int = 0
    failed_subtasks: int = 0
    agents: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(Counter))
    errors: Counter = field(default_factory=Counter)
    messages: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    usage: dict[str, Any] = field(default_factory=dict)

    def note_error(self, kind: str, message: str) -> None:
        self.errors[kind] += 1
        self.messages[kind][message[:300]] += 1

    def unparseable(self) -> dict[str, dict[str, int]]:
        """``{agent: {"replies": n, "unparseable": k}}`` over every LLM step of this system."""
        return {a: {"replies": c["replies"], "unparseable": c["unparseable"]} for a, c in sorted(self.agents.items())}

    def state(self) -> dict[str, Any]:
        """The counters as JSON (a shard's manifest; :meth:`from_states` adds shards' up)."""
        return {
            "samples": self.samples,
            "failed_samples": self.failed_samples,
            "failed_subtasks": self.failed_subtasks,
            "agents": {a: dict(c) for a, c in self.agents.items()},
            "errors": dict(self.errors),
            "messages": {k: dict(c) for k, c in self.messages.items()},
        }

    @classmethod
    def from_states(cls, name: str, states: Sequence[dict[str, Any]]) -> SystemReport:
        """One report with the counters of ``states`` (shards of one run) added up."""
        report = cls(name)
        for state in states:
            report.samples += state["samples"]
            report.failed_samples += state["failed_samples"]
            report.failed_subtasks += state["failed_subtasks"]
            for agent, counts in state["agents"].items():
                report.agents[agent].update(counts)
            report.errors.update(state["errors"])
            for kind, messages in state["messages"].items():
                report.messages[kind].update(messages)
        return report

    def failure_summary(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "failed_samples": self.failed_samples,
            "failed_subtasks": self.failed_subtasks,
            "errors": dict(self.errors.most_common()),
            "most_common": {k: self.messages[k].most_common(1)[0][0] for k in self.errors},
        }


@dataclass
class HarnessReport:
    """What :func:`run_systems` returns: per-system reports, rows written per file, run counts;
    for a shard's manifest also the samples' positions in the whole run (of ``total_items``), the
    rows each sample gave per file, and the raw usage before and during the run."""

    systems: dict[str, SystemReport]
    written: dict[str, int]
    samples: int
    failed_samples: int
    wall_s: float
    peak_concurrency: int
    total_items: int = 0
    positions: list[int] = field(default_factory=list)
    row_counts: dict[str, list[int]] = field(default_factory=dict)
    usage_before: dict[str, Any] = field(default_factory=dict)
    usage_delta: dict[str, Any] = field(default_factory=dict)

    @property
    def failed_share(self) -> float:
        return self.failed_samples / self.samples if self.samples else 0.0

    def failure_summary(self) -> dict[str, Any]:
        """Counts by error and the most common message, per system (what failures.json holds)."""
        return {
            "samples": self.samples,
            "failed_samples": self.failed_samples,
            "failed_share": round(self.failed_share, 4),
            "systems": {name: s.failure_summary() for name, s in self.systems.items()},
        }


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


def plan_samples(
    items: Sequence[I],
    fixed_predictions: dict[str, Sequence[Any]] | None,
    *,
    shard: ShardConfig | None,
    shard_group: Callable[[I], Hashable] | None,
    desc: str,
) -> ShardPlan[I]:
    """This shard's samples (all of them for no shard); EmptyEvaluation when there are none."""
    if not items:
        raise EmptyEvaluation(f"{desc}: no samples to run; check the data path, its filters and data.limit")
    fixed = dict(fixed_predictions or {})
    for name, values in fixed.items():
        if len(values) != len(items):
            raise ValueError(f"fixed predictions of {name!r}: {len(values)} values for {len(items)} samples")
    total_items, shard = len(items), shard or ShardConfig()
    positions = shard.positions(total_items, [shard_group(i) for i in items] if shard_group else None)
    if not positions:
        raise EmptyEvaluation(
            f"{desc}: shard {shard.index}/{shard.count} has no samples ({total_items} in the run"
            f"{', shared out by group' if shard_group else ''}); use a smaller shard count"
        )
    return ShardPlan(
        [items[p] for p in positions],
        {name: [values[p] for p in positions] for name, values in fixed.items()},
        positions,
        total_items,
    )


SystemOutcome = tuple[Any, str | None, list[dict[str, Any]]]
"""One system on one sample: ``(result or None, error or None, trace rows)``."""


async def run_one_system(system: System, item: Any, sample_id: str) -> SystemOutcome:
    """``system`` on ``item`` in its usage scope; an exception is the sample's error, never raised
    (one system failing on a sample never stops the others)."""
    trace = SampleTrace(sample_id, system=system.name)
    with usage_scope(system.name):
        try:
            return await system.worker(item, trace), None, trace.rows
        except Exception as exc:
            log.warning("%s: sample %s failed: %s", system.name, trace.sample_id, exc)
            return None, f"{type(exc).__name__}: {exc}", trace.rows


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
            sample_failed = self.record_system(system, result, error, rows) or sample_failed
            results[system.name] = result
        self.failed_samples += sample_failed
        values = {name: self.plan.fixed[name][outcome.index] for name in self.plan.fixed}
        values.update({name: self.reports[name].predictions[-1] for name in self.reports})
        row = self.prediction_row(item, {n: values[n] for n in self.names if n in values})
        self.streams["predictions.jsonl"].write(row)
        for file, build in self.exports.items():
            for row in build(item, results):
                self.streams[file].write(row)

    def record_system(self, system: System, result: Any, error: str | None, rows: list[dict[str, Any]]) -> bool:
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


async def run_samples(runner: Runner, writer: SampleWriter, sample_id: Callable[[Any], str]) -> RunReport:
    """Every system of each sample concurrently under ``runner``, each finished sample to ``writer``;
    a run that fails or is cancelled leaves no output (nor an earlier run's)."""

    async def worker(item: Any, _trace: SampleTrace) -> list[SystemOutcome]:
        return await asyncio.gather(*(run_one_system(s, item, sample_id(item)) for s in writer.systems))

    try:
        return await runner.run(writer.plan.items, worker, sample_id=sample_id, on_done=writer.on_done)
    except BaseException:
        writer.discard()
        raise


def check_budgets(
    harness: HarnessReport, writer: SampleWriter, *, desc: str, max_failed_share: float, max_unparseable_share: float
) -> None:
    """FailureBudgetExceeded (UnparseableBudgetExceeded) when more samples failed (replies did not
    parse) than the share allowed, naming the most common error and where the traces are."""
    traces, failures = writer.generated / "traces.jsonl", writer.reports_dir / "failures.json"
    if harness.failed_share > max_failed_share:
        worst = max(harness.systems.values(), key=lambda r: r.failed_samples)
        common = worst.failure_summary()["most_common"]
        message = next(iter(common.values()), "no message")
        raise FailureBudgetExceeded(
            f"{desc}: {harness.failed_samples} of {harness.samples} samples failed "
            f"({harness.failed_share:.0%} > max_failed_share {max_failed_share:.0%}); most common error: {message}; "
            f"traces in {traces}, summary in {failures}"
        )
    counts = [c for report in harness.systems.values() for c in report.unparseable().values()]
    replies, bad = sum(c["replies"] for c in counts), sum(c["unparseable"] for c in counts)
    if replies and bad / replies > max_unparseable_share:
        raise UnparseableBudgetExceeded(
            f"{desc}: {bad} of {replies} replies unparseable ({bad / replies:.0%} > max_unparseable_share "
            f"{max_unparseable_share:.0%}); a server that ignores response_format (docs/runtime.md) or a model "
            f"too small for the prompts; traces in {traces}"
        )


async def run_systems(
    items: Sequence[I],
    systems: Sequence[System],
    *,
    accounting: Accounting,
    outputs: GenerationOutputs,
    sample_id: Callable[[I], str],
    prediction_row: Callable[[I, dict[str, Any]], dict[str, Any]],
    exports: dict[str, Callable[[I, dict[str, Any]], Iterable[dict[str, Any]]]] | None = None,
    fixed_predictions: dict[str, Sequence[Any]] | None = None,
    order: Sequence[str] | None = None,
    concurrency: int = 16,
    max_failed_share: float = 0.2,
    max_unparseable_share: float = 1.0,
    progress: bool = True,
    desc: str = "generate",
    shard: ShardConfig | None = None,
    shard_group: Callable[[I], Hashable] | None = None,
) -> HarnessReport:
    """Run ``systems`` over ``items`` and stream the outputs (see the module docstring).

    ``prediction_row(item, predictions)`` builds a predictions.jsonl row from ``{system: value}``
    (``fixed_predictions`` adds systems computed beforehand, e.g. non-LLM baselines, one value per
    item; ``order`` orders the keys, default fixed then run systems). ``exports[file](item, results)``
    gives rows for ``<generated_dir>/<file>`` from ``{system: result}``. ``shard`` runs only that
    shard's items (see :mod:`pipelines.agents.shards`; ``shard_group(item)`` keeps items of one
    group in one shard); ``outputs`` are then the shard's folders.

    The steps: :func:`plan_samples` (this shard's samples), :func:`run_samples` (each finished
    sample through a :class:`SampleWriter`), the files committed and the report with usage.json and
    failures.json written, then :func:`check_budgets`.
    """
    plan = plan_samples(items, fixed_predictions, shard=shard, shard_group=shard_group, desc=desc)
    usage_before = usage_snapshot(accounting)
    writer = SampleWriter(
        plan, systems, outputs=outputs, prediction_row=prediction_row, exports=exports or {}, order=order
    )
    run = await run_samples(Runner(concurrency, desc=desc, progress=progress), writer, sample_id)
    writer.commit()
    for name, report in writer.reports.items():
        report.usage = accounting.scope_summary(name)
    harness = HarnessReport(
        writer.reports,
        {f: s.rows for f, s in writer.streams.items()},
        run.samples,
        writer.failed_samples,
        run.wall_s,
        run.peak_concurrency,
        total_items=plan.total_items,
        positions=plan.positions,
        row_counts=writer.row_counts,
        usage_before=usage_before,
        usage_delta=usage_delta(usage_snapshot(accounting), usage_before),
    )
    write_json_atomic(writer.reports_dir / "usage.json", accounting.report())
    write_json_atomic(writer.reports_dir / "failures.json", harness.failure_summary())
    log.info("%s", summary_line(harness, desc=desc, max_failed_share=max_failed_share))
    check_budgets(
        harness, writer, desc=desc, max_failed_share=max_failed_share, max_unparseable_share=max_unparseable_share
    )
    return harness


def remove_earlier_outputs(files: Iterable[Path], reports_dir: Path) -> None:
    """Remove ``files`` and the reports an earlier run left (a failed run leaves no stale file)."""
    for path in [*files, reports_dir / "failures.json", reports_dir / "usage.json"]:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove %s from an earlier run: %s", path, exc)


def summary_line(report: HarnessReport, *, desc: str, max_failed_share: float) -> str:
    """One line: samples, failed share against the budget, unparseable replies per system, time."""
    parts = []
    for name, system in report.systems.items():
        counts = system.unparseable()
        replies = sum(c["replies"] for c in counts.values())
        bad = sum(c["unparseable"] for c in counts.values())
        parts.append(f"{name}: {system.failed_samples} failed, {bad}/{replies} replies unparseable")
    return (
        f"{desc}: {report.samples} samples, {report.failed_samples} failed "
        f"({report.failed_share:.0%}, budget {max_failed_share:.0%}); " + "; ".join(parts) + f"; {report.wall_s:.1f} s"
    )
