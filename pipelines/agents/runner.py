"""Drive many samples concurrently under one limit; collect results and traces; never stop on one.

    runner = Runner(concurrency=64, desc="tagging")
    report = await runner.run(examples, team.tag, sample_id=lambda ex: ex.id)
    report.write_traces("data/generated/tagging/traces.jsonl")

``worker(item, trace)`` handles one sample and returns its result; it adds trace rows to
``trace`` (a :class:`SampleTrace`). Every LLM call inside it shares the run's
:class:`CallLimiter` (see :mod:`pipelines.agents.limits`), so the engine always sees up to
``concurrency`` requests and no more. Samples are admitted in order, at most ``max_pending`` at
a time, so memory stays bounded on large inputs. An exception in one sample is logged, counted
in ``report.failures`` and stored in its outcome; the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from tqdm.auto import tqdm

from pipelines.agents.agent import AgentRecord
from pipelines.agents.limits import CallLimiter, install
from pipelines.io import write_jsonl_atomic

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741
R = TypeVar("R")


class SampleTrace:
    """Trace rows of one sample, in the order its agents finished."""

    def __init__(self, sample_id: str):
        self.sample_id = sample_id
        self.rows: list[dict[str, Any]] = []

    def add(self, record: AgentRecord, **extra: Any) -> None:
        """Append an agent's record (as a trace row) with extra fields (e.g. ``sandbox``)."""
        self.rows.append(record.to_trace(self.sample_id, **extra))

    def add_row(self, row: dict[str, Any]) -> None:
        self.rows.append({"sample_id": self.sample_id, **row})


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
    """All outcomes in input order, failures counted, wall time and peak concurrency."""

    outcomes: list[SampleOutcome[R]] = field(default_factory=list)
    wall_s: float = 0.0
    peak_concurrency: int = 0

    @property
    def failures(self) -> int:
        return sum(not o.ok for o in self.outcomes)

    @property
    def results(self) -> list[R | None]:
        return [o.result for o in self.outcomes]

    def trace_rows(self) -> list[dict[str, Any]]:
        return [row for o in self.outcomes for row in o.trace]

    def write_traces(self, path: Path | str) -> int:
        """Write every trace row as JSONL, atomically; returns the number of rows."""
        return write_jsonl_atomic(path, self.trace_rows())


class Runner:
    """Runs ``worker`` over samples with at most ``concurrency`` LLM calls in flight."""

    def __init__(
        self, concurrency: int, *, desc: str = "samples", max_pending: int | None = None, progress: bool = True
    ):
        self.limiter = CallLimiter(concurrency)
        self.desc = desc
        self.max_pending = max_pending or max(4 * concurrency, 16)
        self.progress = progress

    async def run(
        self,
        items: Iterable[I],
        worker: Callable[[I, SampleTrace], Awaitable[R]],
        *,
        sample_id: Callable[[I], str] | None = None,
    ) -> RunReport[R]:
        items = list(items)
        outcomes: list[SampleOutcome[R] | None] = [None] * len(items)
        admission = asyncio.Semaphore(self.max_pending)
        bar = tqdm(total=len(items), desc=self.desc, unit="sample", disable=not self.progress)
        start = time.perf_counter()

        async def one(index: int, item: I) -> None:
            install(self.limiter, index)
            sid = sample_id(item) if sample_id else str(index)
            trace = SampleTrace(sid)
            began = time.perf_counter()
            try:
                result, error = await worker(item, trace), None
            except Exception as exc:  # one bad sample never stops the run
                log.warning("sample %s failed: %s", sid, exc)
                log.debug("%s", traceback.format_exc())
                result, error = None, f"{type(exc).__name__}: {exc}"
            outcomes[index] = SampleOutcome(index, sid, result, error, trace.rows, time.perf_counter() - began)
            bar.update(1)
            if error:
                bar.set_postfix(failed=sum(1 for o in outcomes if o is not None and not o.ok))

        async def admitted(index: int, item: I) -> None:
            try:
                await one(index, item)
            finally:
                admission.release()

        tasks = []
        try:
            for index, item in enumerate(items):
                await admission.acquire()
                tasks.append(asyncio.create_task(admitted(index, item)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            bar.close()
        report = RunReport([o for o in outcomes if o is not None], time.perf_counter() - start, self.limiter.peak)
        if report.failures:
            log.warning("%s: %d of %d samples failed (see their outcomes)", self.desc, report.failures, len(items))
        return report
