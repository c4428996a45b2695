"""Shortfalls: what a stage was asked for and did not deliver, said once in the same shape by every
stage, as a WARNING in its log and as ``metrics["shortfalls"]`` (the report shows them).

    found = [
        count_shortfall("dialogues", requested=6, produced=3, cause="13 of 16 topic replies did not parse"),
        *unparseable_shortfalls({"planner": {"replies": 10, "unparseable": 2}}),
        flat_shortfall("DPO loss", [0.693, 0.693, 0.693], unit="step"),
    ]
    metrics["shortfalls"] = flag_shortfalls("generate_ram2c", found)   # logs each, returns JSON rows

A row: ``{"what", "requested", "produced", "cause"}`` (counts where they apply, else None).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger("edumas")


@dataclass(frozen=True)
class Shortfall:
    what: str
    requested: int | None = None
    produced: int | None = None
    cause: str = ""

    def line(self) -> str:
        """``3 of 6 dialogues (13 of 16 topic replies did not parse)``."""
        text = f"{self.produced} of {self.requested} {self.what}" if self.requested is not None else self.what
        return f"{text} ({self.cause})" if self.cause else text


def count_shortfall(what: str, requested: int | None, produced: int | None, *, cause: str = "") -> Shortfall | None:
    """A shortfall when fewer than ``requested`` were produced (None when either is unknown)."""
    if requested is None or produced is None or produced >= requested:
        return None
    return Shortfall(what, int(requested), int(produced), cause)


def unparseable_shortfalls(by_role: Mapping[str, Any] | None, *, what: str = "replies") -> list[Shortfall]:
    """One shortfall per role with unparseable replies: ``{role: {"replies": n, "unparseable": k}}``
    (a plain count ``{role: k}`` has no total and says only how many)."""
    found = []
    for role, counts in (by_role or {}).items():
        if isinstance(counts, Mapping):
            total, bad = counts.get("replies"), int(counts.get("unparseable") or 0)
        else:
            total, bad = None, int(counts or 0)
        if bad <= 0:
            continue
        if total is None:
            found.append(Shortfall(f"{role} {what} unparseable", cause=f"{bad} {what} did not parse"))
        else:
            found.append(Shortfall(f"{role} {what} parsed", int(total), int(total) - bad,
                                   f"{bad} of {total} did not parse"))  # fmt: skip
    return found


def flat_shortfall(
    what: str, values: Sequence[float], *, unit: str = "step", tolerance: float = 1e-6
) -> Shortfall | None:
    """A series that never moved (e.g. a loss equal at every logged step), when it has 2+ points."""
    if len(values) < 2 or max(values) - min(values) > tolerance:
        return None
    return Shortfall(f"{what} did not move", cause=f"{values[0]:.3f} at every one of {len(values)} {unit}s")


def flag_shortfalls(stage: str, found: Iterable[Shortfall | None]) -> list[dict[str, Any]]:
    """Log each shortfall as a WARNING of ``stage``; return them as JSON rows for its metrics."""
    rows = []
    for shortfall in found:
        if shortfall is None:
            continue
        log.warning("%s: shortfall: %s", stage, shortfall.line())
        rows.append(asdict(shortfall))
    return rows


def shortfall_line(row: Mapping[str, Any]) -> str:
    """A metrics row back as its sentence (the report's cells)."""
    return Shortfall(**{k: row.get(k) for k in ("what", "requested", "produced")}, cause=row.get("cause") or "").line()
