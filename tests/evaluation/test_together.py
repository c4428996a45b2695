"""Independent evaluation runs at the same time (pipelines.evaluation.together)."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.errors import StageError
from pipelines.evaluation.together import first_failure, run_together


def test_results_come_back_by_name_in_the_order_given_while_the_runs_overlap():
    events: list[str] = []

    async def run(name: str, delay: float) -> str:
        events.append(f"start {name}")
        await asyncio.sleep(delay)
        events.append(f"end {name}")
        return name.upper()

    results = asyncio.run(run_together({"slow": run("slow", 0.05), "fast": run("fast", 0.0)}))
    assert list(results.items()) == [("slow", "SLOW"), ("fast", "FAST")]
    assert events == ["start slow", "start fast", "end fast", "end slow"]


def test_a_failing_run_cancels_the_others_and_raises_its_own_error_not_a_group():
    cancelled: list[str] = []

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise StageError("kgc: 2 evaluated sentences gave SFT rows")

    async def long() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append("long")
            raise

    with pytest.raises(StageError, match="gave SFT rows"):
        asyncio.run(run_together({"tagging": long(), "kgc": fails()}))
    assert cancelled == ["long"]


def test_nested_groups_give_their_first_failure():
    inner = ExceptionGroup("arms", [ValueError("tuned arm"), KeyError("base")])
    assert isinstance(first_failure(ExceptionGroup("systems", [inner])), ValueError)
    plain = RuntimeError("x")
    assert first_failure(plain) is plain
