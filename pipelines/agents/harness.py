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

Its parts: :mod:`pipelines.agents.harness_report` (:class:`System` and the reports) and
:mod:`pipelines.agents.sample_writer` (the streamed files); here the steps of :func:`run_systems`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from pipelines.agents.harness_report import HarnessReport, System, SystemReport
from pipelines.agents.outputs import GenerationOutputs
from pipelines.agents.runner import Runner, RunReport, SampleTrace
from pipelines.agents.sample_writer import JsonlStream, SampleWriter, ShardPlan
from pipelines.agents.shards import ShardConfig
from pipelines.io import write_json_atomic
from pipelines.llm.accounting import Accounting, usage_delta, usage_scope, usage_snapshot
from pipelines.stage import StageError

__all__ = [  # what the teams and evaluation import from here
    "EmptyEvaluation",
    "FailureBudgetExceeded",
    "GenerationOutputs",
    "HarnessReport",
    "JsonlStream",
    "System",
    "SystemReport",
    "UnparseableBudgetExceeded",
    "run_systems",
]

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741


class FailureBudgetExceeded(StageError):
    """More samples failed than ``max_failed_share`` allows; the outputs and failures.json are written."""


class UnparseableBudgetExceeded(FailureBudgetExceeded):
    """Most replies of a system did not parse (more than ``max_unparseable_share``); outputs are written."""


class EmptyEvaluation(StageError):
    """A run with no samples (the data, filters or limit leave none)."""


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


async def run_one_system(system: System, item: Any, *, sample_id: str) -> SystemOutcome:
    """``system`` on ``item`` in its usage scope; an exception is the sample's error, never raised
    (one system failing on a sample never stops the others)."""
    trace = SampleTrace(sample_id, system=system.name)
    with usage_scope(system.name):
        try:
            return await system.worker(item, trace), None, trace.rows
        except Exception as exc:
            log.warning("%s: sample %s failed: %s", system.name, trace.sample_id, exc)
            return None, f"{type(exc).__name__}: {exc}", trace.rows


async def run_samples(runner: Runner, writer: SampleWriter, *, sample_id: Callable[[Any], str]) -> RunReport:
    """Every system of each sample concurrently under ``runner``, each finished sample to ``writer``;
    a run that fails or is cancelled leaves no output (nor an earlier run's)."""

    async def worker(item: Any, _trace: SampleTrace) -> list[SystemOutcome]:
        return await asyncio.gather(*(run_one_system(s, item, sample_id=sample_id(item)) for s in writer.systems))

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
    run = await run_samples(Runner(concurrency, desc=desc, progress=progress), writer, sample_id=sample_id)
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
