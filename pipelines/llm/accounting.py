"""Usage accounting per agent role: calls, tokens, cache hits, errors and latency."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
        lat = sorted(self.latencies)

        def pct(q: float) -> float:
            return round(lat[min(len(lat) - 1, int(q * len(lat)))], 4) if lat else 0.0

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


class Accounting:
    """Collects :class:`RoleUsage` per role; ``summary()`` adds a ``total`` entry."""

    def __init__(self) -> None:
        self.roles: dict[str, RoleUsage] = defaultdict(RoleUsage)

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
        usage = self.roles[role]
        usage.calls += 1
        usage.cache_hits += int(cached)
        usage.not_cached += int(uncacheable)
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        if not cached:
            usage.latencies.append(latency_s)

    def record_error(self, role: str) -> None:
        usage = self.roles[role]
        usage.calls += 1
        usage.errors += 1

    def summary(self) -> dict[str, dict[str, Any]]:
        out = {role: usage.summary() for role, usage in sorted(self.roles.items())}
        total = RoleUsage()
        for usage in self.roles.values():
            total.calls += usage.calls
            total.cache_hits += usage.cache_hits
            total.errors += usage.errors
            total.not_cached += usage.not_cached
            total.prompt_tokens += usage.prompt_tokens
            total.completion_tokens += usage.completion_tokens
            total.latencies.extend(usage.latencies)
        out["total"] = total.summary()
        return out

    def write(self, path: Path | str) -> None:
        """Write the summary as metrics JSON (atomically)."""
        write_json_atomic(Path(path), self.summary())

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return json.dumps(self.summary(), indent=1)
