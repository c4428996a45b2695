"""Drive many samples concurrently under one limit; deliver each sample's outcome in input order.

    runner = Runner(concurrency=64, desc="tagging")
    report = await runner.run(examples, team.tag, sample_id=lambda ex: ex.id, on_done=writer.write)

``worker(item, trace)`` handles one sample and returns its result; it adds trace rows to
``trace`` (a :class:`SampleTrace`). Every LLM call inside it shares the run's
:class:`CallLimiter` (see :mod:`pipelines.llm.limits`), so the engine always sees up to
``concurrency`` requests and no more. Samples are admitted in order, at most ``max_pending`` at
a time; ``on_done(outcome)`` receives every :class:`SampleOutcome` in input order as soon as it
and all earlier samples are done, and a sample's admission slot is freed only then, so memory
stays bounded on any number of samples. Without ``on_done`` the report keeps the outcomes
(results and traces; for tests and small runs). An exception in one sample is logged, counted
in ``report.failures`` and stored in its outcome; the run goes on.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from tqdm.auto import tqdm

from pipelines.agents.agent import AgentRecord, to_jsonable
from pipelines.agents.trace_order import order_key, ordered_tasks, sort_rows
from pipelines.io import write_jsonl_atomic
from pipelines.llm.limits import CallLimiter, install

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741
R = TypeVar("R")


class SampleTrace:
    """Trace rows of one sample; ``extra`` is added to every row (the harness adds ``system``).
    ``rows`` are in program order, not the order concurrent steps finished, when the run is inside
    :func:`pipelines.agents.trace_order.ordered_tasks` (the harness's is): identical runs write
    identical traces."""

    def __init__(self, sample_id: str, **extra: Any):
        self.sample_id = sample_id
        self.extra = extra
        self._rows: list[dict[str, Any]] = []
        self._keys: list[tuple[int, ...]] = []

    @property
    def rows(self) -> list[dict[str, Any]]:
        return sort_rows(self._rows, self._keys)

    def _append(self, row: dict[str, Any]) -> None:
        self._keys.append(order_key())
        self._rows.append(row)

    def add(self, record: AgentRecord, **extra: Any) -> None:
        """Append an LLM step: an agent's record as a trace row, with extra fields (e.g. ``sandbox``)."""
        self._append({**record.to_trace(self.sample_id, **extra), **self.extra})

    def add_result(
        self,
        agent: str,
        role: str,
        *,
        result: Any,
        ok: bool = True,
        error: str | None = None,
        inputs: dict[str, Any] | None = None,
        latency_s: float = 0.0,
        **extra: Any,
    ) -> None:
        """Append a non-LLM step (aggregation, retrieval, sandbox) in the trace row format.

        A retrieval step: ``add_result("retrieval", group, inputs={"queries": [...]},
        result={"hits": [{"id", "kind", "score", "text"}, ...]}, latency_s=0.12)``.
        """
        row = {
            "sample_id": self.sample_id,
            "agent": agent,
            "role": role,
            "prompt": None,
            "reply": None,
            "parsed": to_jsonable(result),
            "ok": ok,
            "error": error,
            "usage": {},
            "cached": False,
        }
        if inputs is not None:
            row["inputs"] = to_jsonable(inputs)
        if latency_s:
            row["latency_s"] = round(latency_s, 6)
        row.update({k: to_jsonable(v) for k, v in extra.items()})
        self._append({**row, **self.extra})

    def add_row(self, row: dict[str, Any]) -> None:
        self._append({"sample_id": self.sample_id, **row, **self.extra})


@dataclass
class SampleOutcome(Generic[R]):
    """One sample's result, or the error that ended it, and its trace rows."""

    index: int
    sample_id: str
    result: R | None
    error: str | None
    trace: list[dict[str, Any]]
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class RunReport(Generic[R]):
    """Counts of a run; ``outcomes`` only when the run had no ``on_done`` sink (else empty).

    ``errors`` counts failed samples by error type; ``first_errors`` keeps one message per type.
    """

    outcomes: list[SampleOutcome[R]] = field(default_factory=list)
    wall_s: float = 0.0
    peak_concurrency: int = 0
    samples: int = 0
    failures: int = 0
    errors: Counter = field(default_factory=Counter)
    first_errors: dict[str, str] = field(default_factory=dict)

    @property
    def results(self) -> list[R | None]:
        return [o.result for o in self.outcomes]

    def trace_rows(self) -> list[dict[str, Any]]:
        return [row for o in self.outcomes for row in o.trace]

    def write_traces(self, path: Path | str) -> int:
        """Write every kept trace row as JSONL, atomically; returns the number of rows."""
        return write_jsonl_atomic(path, self.trace_rows())


class Runner:
    """Runs ``worker`` over samples with at most ``concurrency`` LLM calls in flight."""

    def __init__(
        self, concurrency: int, *, desc: str = "samples", max_pending: int | None = None, progress: bool = True
    ):
        self.limiter = CallLimiter(concurrency)
        self.desc = desc
        self.progress_every_s = 0.5  # the bar's LLM-call count is refreshed at most this often
        self.max_pending = max_pending or max(4 * concurrency, 16)
        self.progress = progress

    async def run(
        self,
        items: Iterable[I],
        worker: Callable[[I, SampleTrace], Awaitable[R]],
        *,
        sample_id: Callable[[I], str] | None = None,
        on_done: Callable[[SampleOutcome[R]], None] | None = None,
        total: int | None = None,
    ) -> RunReport[R]:
        """Run every item; ``on_done`` gets outcomes in input order (see the module docstring)."""
        report: RunReport[R] = RunReport()
        admission = asyncio.Semaphore(self.max_pending)
        finished: dict[int, SampleOutcome[R]] = {}
        next_index = [0]
        total = total if total is not None else (len(items) if hasattr(items, "__len__") else None)
        bar = tqdm(total=total, desc=self.desc, unit="sample", disable=not self.progress)
        shown = [0.0]

        def show_calls(limiter: CallLimiter | None = None, *, force: bool = False) -> None:
            # progress per LLM call, not only per sample: a step of long calls moves the bar's postfix
            now = time.monotonic()
            if bar.disable or (not force and now - shown[0] < self.progress_every_s):
                return
            shown[0] = now
            postfix = {"llm_calls": self.limiter.done, "in_flight": self.limiter.in_use}
            if report.failures:
                postfix["failed"] = report.failures
            bar.set_postfix(postfix, refresh=True)

        self.limiter.on_release = show_calls
        # what exists before the run (libraries, configs, stores) lives on; frozen, the collector's full
        # passes skip it instead of stopping every call in flight to walk it (the outermost run only)
        froze = gc.get_freeze_count() == 0
        if froze:
            gc.freeze()
        start = time.perf_counter()

        def deliver() -> None:
            while next_index[0] in finished:
                outcome = finished.pop(next_index[0])
                next_index[0] += 1
                report.samples += 1
                if not outcome.ok:
                    report.failures += 1
                    kind = outcome.error.split(":", 1)[0]
                    report.errors[kind] += 1
                    report.first_errors.setdefault(kind, outcome.error)
                if on_done is None:
                    report.outcomes.append(outcome)
                else:
                    on_done(outcome)
                admission.release()

        async def one(index: int, item: I) -> None:
            install(self.limiter, sample=index)  # one priority for all: calls are served in arrival order
            sid = sample_id(item) if sample_id else str(index)
            trace = SampleTrace(sid)
            began = time.perf_counter()
            self.limiter.active_samples += 1
            try:
                result, error = await worker(item, trace), None
            except Exception as exc:  # one bad sample never stops the run
                log.warning("sample %s failed: %s", sid, exc)
                log.debug("%s", traceback.format_exc())
                result, error = None, f"{type(exc).__name__}: {exc}"
            finally:
                self.limiter.active_samples -= 1
            finished[index] = SampleOutcome(index, sid, result, error, trace.rows, time.perf_counter() - began)
            bar.update(1)
            deliver()
            show_calls(force=bool(error))

        tasks: set[asyncio.Task] = set()
        try:
            with ordered_tasks():  # trace rows in program order, not completion order (trace_order)
                for index, item in enumerate(items):
                    await admission.acquire()
                    task = asyncio.create_task(one(index, item))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                while tasks:
                    await asyncio.gather(*list(tasks))
        finally:
            for task in list(tasks):
                task.cancel()
            show_calls(force=True)
            self.limiter.on_release = None
            bar.close()
            if froze:
                gc.unfreeze()
        report.wall_s = time.perf_counter() - start
        report.peak_concurrency = self.limiter.peak
        if report.failures:
            log.warning("%s: %d of %d samples failed", self.desc, report.failures, report.samples)
        return report
