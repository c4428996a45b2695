"""Shortfalls the report reads from stages that do not record their own (``make_datasets``,
``build_kb``), in the shape of :mod:`pipelines.agents.shortfalls`:

- ``make_datasets``: per dataset (sft, dpo) the rows kept vs read, when rows were dropped as longer
  than ``train.max_length`` tokens (or invalid, or duplicates);
- ``build_kb``: every knowledge-base kind ``build_kb.sources`` names that holds no chunk (its
  optional sources missing), so a retrieval group reads nothing of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.agents.shortfalls import Shortfall, count_shortfall

REMOVED = {"too_long": "longer than train.max_length tokens", "invalid": "invalid", "duplicates": "duplicates"}


def make_datasets_shortfalls(metrics: Mapping[str, Any]) -> list[Shortfall | None]:
    """``{"counts": {kind: {"train", "eval", "removed": {reason: n}}}}`` -> rows kept vs read."""
    found: list[Shortfall | None] = []
    for kind, counts in (metrics.get("counts") or {}).items():
        removed = {k: int(v or 0) for k, v in (counts.get("removed") or {}).items() if int(v or 0) > 0}
        kept = int(counts.get("train") or 0) + int(counts.get("eval") or 0)
        cause = ", ".join(f"{n} {REMOVED.get(k, k)}" for k, n in removed.items())
        found.append(count_shortfall(f"{kind.upper()} rows kept by make_datasets", kept + sum(removed.values()),
                                     kept, cause=f"dropped: {cause}"))  # fmt: skip
    return found


def build_kb_shortfalls(metrics: Mapping[str, Any], params: Mapping[str, Any]) -> list[Shortfall | None]:
    """A row per kind of ``build_kb.sources`` with no chunk in ``chunks_by_kind``."""
    kinds = dict.fromkeys(s.get("kind") for s in ((params.get("build_kb") or {}).get("sources") or []) if s.get("kind"))
    chunks = metrics.get("chunks_by_kind") or {}
    missing = ", ".join(str(s) for s in metrics.get("optional_sources_missing") or []) or "none recorded"
    return [
        Shortfall(f"knowledge-base kind {kind}: 0 chunks", cause=f"optional sources missing: {missing}")
        for kind in kinds
        if not chunks.get(kind)
    ]
