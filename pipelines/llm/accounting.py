"""Usage accounting per agent role: calls, tokens, cache hits, errors and latency.

Every call is also attributed to the current *usage scope* (a context variable; the generation
harness opens one per system), so a stage running several systems over the same samples gets each
system's usage without a table of which roles belong to which system::

    with usage_scope("team"):
        await team.tag(example, trace)          # every llm.chat in here counts for "team"
    accounting.scope_summary("team")            # {"planner": {...}, ..., "total": {...}}
"""

from __future__ import annotations

import contextvars
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.io import write_json_atomic


@dataclass
class RoleUsage:
    """Running totals of one role. ``calls`` counts every request, cached or not; ``not_cached``
    counts fresh replies kept out of the cache (empty or content-filtered)."""

    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    not_cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latencies: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lat = self.latencies

        def pct(q: float) -> float:  # numpy's linear interpolation (the p50 of [1, 2] is 1.5)
            return round(float(np.percentile(lat, 100 * q)), 4) if lat else 0.0

        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "errors": self.errors,
            "not_cached": self.not_cached,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_mean_s": round(sum(lat) / len(lat), 4) if lat else 0.0,
            "latency_p50_s": pct(0.5),
            "latency_p95_s": pct(0.95),
        }


_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("edumas_usage_scope", default=None)


@contextmanager
def usage_scope(name: str) -> Iterator[None]:
    """Attribute every call made in this context (and the tasks it creates) to scope ``name``."""
    token = _scope.set(name)
    try:
        yield
    finally:
        _scope.reset(token)


def _summaries(roles: dict[str, RoleUsage]) -> dict[str, dict[str, Any]]:
    out = {role: usage.summary() for role, usage in sorted(roles.items())}
    total = RoleUsage()
    for usage in roles.values():
        total.calls += usage.calls
        total.cache_hits += usage.cache_hits
        total.errors += usage.errors
        total.not_cached += usage.not_cached
        total.prompt_tokens += usage.prompt_tokens
        total.completion_tokens += usage.completion_tokens
        total.latencies.extend(usage.latencies)
    out["total"] = total.summary()
    return out


class Accounting:
    """Collects :class:`RoleUsage` per role, and per role within each usage scope.

    ``summary()`` is per role plus ``total``; ``scope_summary(name)`` the same for one scope;
    ``report()`` both (``{"total", "roles", "systems": {scope: {role..., "total"}}}``).
    """

    def __init__(self) -> None:
        self.roles: dict[str, RoleUsage] = defaultdict(RoleUsage)
        self.scopes: dict[str, dict[str, RoleUsage]] = defaultdict(lambda: defaultdict(RoleUsage))

    def _targets(self, role: str) -> list[RoleUsage]:
        scope = _scope.get()
        return [self.roles[role]] + ([self.scopes[scope][role]] if scope is not None else [])

    def record(
        self,
        role: str,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        cached: bool,
        latency_s: float,
        uncacheable: bool = False,
    ) -> None:
        for usage in self._targets(role):
            usage.calls += 1
            usage.cache_hits += int(cached)
            usage.not_cached += int(uncacheable)
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            if not cached:
                usage.latencies.append(latency_s)

    def record_error(self, role: str) -> None:
        for usage in self._targets(role):
            usage.calls += 1
            usage.errors += 1

    def summary(self) -> dict[str, dict[str, Any]]:
        return _summaries(self.roles)

    def scope_summary(self, scope: str) -> dict[str, dict[str, Any]]:
        """Per role and ``total`` of the calls made inside ``usage_scope(scope)`` (zeros if none)."""
        return _summaries(self.scopes.get(scope, {}))

    def report(self) -> dict[str, Any]:
        """What ``usage.json`` holds: overall total, per role, and per scope (system)."""
        roles = self.summary()
        total = roles.pop("total")
        return {"total": total, "roles": roles, "systems": {s: self.scope_summary(s) for s in sorted(self.scopes)}}

    def write(self, path: Path | str) -> None:
        """Write the summary as metrics JSON (atomically)."""
        write_json_atomic(Path(path), self.summary())

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return json.dumps(self.summary(), indent=1)


USAGE_FIELDS = ("calls", "cache_hits", "errors", "not_cached", "prompt_tokens", "completion_tokens")

# Raw usage (every counter and every latency), so shards' usage adds up to one run's exactly.


def raw_usage(usage: RoleUsage) -> dict[str, Any]:
    return {**{f: getattr(usage, f) for f in USAGE_FIELDS}, "latencies": list(usage.latencies)}


def usage_snapshot(accounting: Accounting) -> dict[str, Any]:
    """``{"roles": {role: raw}, "scopes": {scope: {role: raw}}}`` of ``accounting`` now."""
    return {
        "roles": {r: raw_usage(u) for r, u in accounting.roles.items()},
        "scopes": {s: {r: raw_usage(u) for r, u in roles.items()} for s, roles in accounting.scopes.items()},
    }


def _combine(a: dict[str, Any], b: dict[str, Any], sign: int) -> dict[str, Any]:
    out = {f: a.get(f, 0) + sign * b.get(f, 0) for f in USAGE_FIELDS}
    if sign > 0:
        out["latencies"] = list(a.get("latencies", [])) + list(b.get("latencies", []))
    else:  # b is an earlier snapshot of a: the latencies recorded since
        out["latencies"] = list(a.get("latencies", []))[len(b.get("latencies", [])) :]
    return out


def _combine_tables(a: dict, b: dict, sign: int) -> dict:
    return {k: _combine(a.get(k, {}), b.get(k, {}), sign) for k in sorted(set(a) | set(b))}


def usage_delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What was recorded between two snapshots of one accounting."""
    scopes = sorted(set(after["scopes"]) | set(before["scopes"]))
    return {
        "roles": _combine_tables(after["roles"], before["roles"], -1),
        "scopes": {s: _combine_tables(after["scopes"].get(s, {}), before["scopes"].get(s, {}), -1) for s in scopes},
    }


def usage_sum(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {"roles": {}, "scopes": {}}
    for part in parts:
        total["roles"] = _combine_tables(total["roles"], part["roles"], 1)
        for scope in set(total["scopes"]) | set(part["scopes"]):
            total["scopes"][scope] = _combine_tables(total["scopes"].get(scope, {}), part["scopes"].get(scope, {}), 1)
    return total


def accounting_from(raw: dict[str, Any]) -> Accounting:
    """An :class:`Accounting` holding the raw usage (for ``report()`` and ``scope_summary()``)."""
    accounting = Accounting()

    def fill(target: RoleUsage, values: dict[str, Any]) -> None:
        for f in USAGE_FIELDS:
            setattr(target, f, values.get(f, 0))
        target.latencies = list(values.get("latencies", []))

    for role, values in raw["roles"].items():
        fill(accounting.roles[role], values)
    for scope, roles in raw["scopes"].items():
        for role, values in roles.items():
            fill(accounting.scopes[scope][role], values)
    return accounting
