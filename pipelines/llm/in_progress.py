"""The count of ``LLM.chat`` calls in progress (entered and not yet returned, cached ones included),
kept by :mod:`pipelines.llm.client` and read by :mod:`pipelines.llm.waves`; while any is in progress
the garbage collector's young generation is collected less often."""

from __future__ import annotations

import gc


class _YoungGenerationWhileBusy:
    """While LLM calls are in flight (cached ones too) the garbage collector's young generation is collected after
    ``threshold`` net allocations instead of Python's 700.

    Thousands of calls in flight keep their objects alive for the call's latency, so every young
    collection finds nothing to free and promotes them, and the old generations fill with
    soon-dead objects: collections took 10-25 % of the client's CPU per call in
    ``benchmarks/runtime_overhead.py`` (2,000 calls at 256 in flight: ~200 ms of pauses, among
    them full collections of 100-160 ms), while the call path makes no reference cycles. The
    previous thresholds return when the last call ends."""

    threshold = 10_000

    def __init__(self) -> None:
        self.in_flight = 0
        self.saved: tuple[int, int, int] | None = None

    def enter(self) -> None:
        if self.in_flight == 0:
            saved = gc.get_threshold()
            if 0 < saved[0] < self.threshold:
                gc.set_threshold(self.threshold, saved[1], 100)
                self.saved = saved
        self.in_flight += 1

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0 and self.saved is not None:
            if gc.get_threshold()[0] == self.threshold:  # nobody else changed it meanwhile
                gc.set_threshold(*self.saved)
            self.saved = None


_busy = _YoungGenerationWhileBusy()


def calls_in_progress() -> int:
    """``LLM.chat`` calls entered and not yet returned, cached ones included (:mod:`pipelines.llm.waves`)."""
    return _busy.in_flight
