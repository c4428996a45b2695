"""When a wave of batch calls is complete: every LLM call in progress, and every sample, waits on a batch.

A call in ``LLM.chat`` is *in progress* from entry to return (:func:`pipelines.llm.in_progress.calls_in_progress`);
it is *parked* while it waits on something only a batch can settle: its own line in a batch
collector, or an identical call in flight that is (``LLM._same_call_in_flight``). The wave is
complete when

- the run's limit is full and calls wait for a slot (no further call can join), or
- every call in progress is parked or waits for a slot, and every sample the runner has started
  has a parked call (a sample busy outside the LLM, in a retrieval or a sandbox run, would make
  its next call soon).

Then no further call can become ready until a batch returns. Outside a runner only the calls count.
(Systems of one sample run side by side: while one of them waits on a batch, the sample counts as
waiting, and another system's step outside the LLM may miss the wave.)
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from pipelines.llm.in_progress import calls_in_progress
from pipelines.llm.limits import current, current_sample

_parked = [0]
_samples: Counter = Counter()  # (id of the run's limiter, sample index) -> its parked calls


@contextlib.contextmanager
def parked() -> Iterator[None]:
    """Mark the current call as waiting on a batch for the duration of the block."""
    index = current_sample()
    sample = (id(current()[0]), index) if index is not None else None
    _parked[0] += 1
    if sample is not None:
        _samples[sample] += 1
    try:
        yield
    finally:
        _parked[0] -= 1
        if sample is not None:
            _samples[sample] -= 1
            if not _samples[sample]:
                del _samples[sample]


def parked_calls() -> int:
    return _parked[0]


def quiescent(limiter: Any = None) -> bool:
    """Whether the wave is complete (see the module docstring); ``limiter``: the run's call limiter."""
    if limiter is None:
        return calls_in_progress() <= _parked[0]
    if limiter.waiting and limiter.in_use >= limiter.limit:
        return True
    if calls_in_progress() - limiter.waiting > _parked[0]:
        return False
    run = id(limiter)
    return sum(1 for key in _samples if key[0] == run) >= limiter.active_samples
