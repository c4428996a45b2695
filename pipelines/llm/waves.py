"""When a wave of batch calls is complete: every LLM call in progress waits on a batch.

A call in ``LLM.chat`` is *in progress* from entry to return (:func:`pipelines.llm.client.calls_in_progress`);
it is *parked* while it waits on something only a batch can settle: its own item in a batch
collector, or an identical call in flight that is (``LLM._same_call_in_flight``). Calls waiting for
a slot of the run's limit cannot join the wave either. Once in-progress calls minus those waiting
for a slot are all parked, no further call can become ready until a batch returns: the wave is
complete. (A sample busy outside the LLM, e.g. in a sandbox, for longer than the collector's
``settle_s`` misses the wave and joins the next.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

_parked = [0]


@contextlib.contextmanager
def parked() -> Iterator[None]:
    """Mark the current call as waiting on a batch for the duration of the block."""
    _parked[0] += 1
    try:
        yield
    finally:
        _parked[0] -= 1


def parked_calls() -> int:
    return _parked[0]


def quiescent(limiter: Any = None) -> bool:
    """Whether every call in progress is parked (or waiting for a slot of ``limiter``)."""
    from pipelines.llm.client import calls_in_progress

    waiting_for_slot = getattr(limiter, "waiting", 0) if limiter is not None else 0
    return calls_in_progress() - waiting_for_slot <= _parked[0]
