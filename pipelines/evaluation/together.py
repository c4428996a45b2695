"""Independent evaluation runs at the same time: the systems of the stage, the arms of a system.

``results = await run_together({"base": run_base(), "tuned": run_tuned()})`` awaits every coroutine
in one :class:`asyncio.TaskGroup` and returns their results under the same names, in the order
given (not the order they finished). When one fails the others are cancelled and its own
exception is raised, not an ``ExceptionGroup``, so a stage still reports a ``StageError`` or an
``LLMError`` as one line.

Why at once: local CPU models decode at the speed of memory, so two models on a core each finish
sooner together than one after the other (:mod:`pipelines.llm.cpu_threads` shares the cores), and
served backends get more calls in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any


def first_failure(error: BaseException) -> BaseException:
    """The first exception inside ``error``'s (nested) exception groups; ``error`` if it is none."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def run_together(runs: Mapping[str, Coroutine[Any, Any, Any]]) -> dict[str, Any]:
    """Await ``runs`` concurrently; their results by name, in ``runs``' order (see the module docstring)."""
    tasks: dict[str, asyncio.Task] = {}
    try:
        async with asyncio.TaskGroup() as group:
            for name, run in runs.items():
                tasks[name] = group.create_task(run, name=name)
    except BaseExceptionGroup as failed:
        raise first_failure(failed) from None
    return {name: task.result() for name, task in tasks.items()}
