"""What the generation harness runs and reports: a :class:`System` (one method over every sample),
a :class:`SystemReport` (its counts, errors, usage and predictions) and the :class:`HarnessReport`
of a run (per-system reports, rows written, run counts, and what a shard's manifest records)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pipelines.agents.runner import SampleTrace

I = TypeVar("I")  # noqa: E741
R = TypeVar("R")


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
