"""CPU threads shared by the local models that generate at the same time in one process.

A small model decoding on a CPU is bound by memory bandwidth, not arithmetic: on a 2-core machine
a second intra-op thread makes one SmolLM2 ``generate`` only 10-20 % faster, while two ``generate``
calls of two models (an evaluation's base and tuned arms) on one thread each finish 1.4-1.5 times
sooner than one after the other on two threads each; on two threads each at once they fight for
the cores. So a ``generate`` on the CPU runs on ``max(1, budget // running)`` intra-op threads,
where ``running`` counts the CPU generates of this process in flight when it starts (itself
included) and ``budget`` is the backend's ``threads`` or, unset, torch's thread count when the
model loaded (the cores, or ``OMP_NUM_THREADS``). Alone it gets the whole budget, as before.

The count is set on the generating thread for the call and restored after (torch's intra-op count
is per calling thread under OpenMP), so other threads of the process keep theirs. A row's logits
depend on the thread count only in their last bits, as they already do on the batch's shape (see
:mod:`pipelines.llm.transformers_backend` on reproducibility).

    with GENERATES.threads(budget) as n:
        model.generate(...)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SharedCpuThreads:
    """Counts the CPU generates in flight and gives each its share of the intra-op threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0

    def share(self, budget: int) -> int:
        """Threads for a generate starting now with ``running`` others already in flight."""
        return max(1, budget // (self.running + 1))

    @contextmanager
    def threads(self, budget: int) -> Iterator[int]:
        """Run the block on this thread with its share of ``budget`` threads; yields the count."""
        import torch

        with self._lock:
            count = self.share(budget)
            self.running += 1
        before = torch.get_num_threads()
        torch.set_num_threads(count)
        try:
            yield count
        finally:
            torch.set_num_threads(before)
            with self._lock:
                self.running -= 1


GENERATES = SharedCpuThreads()
"""The process's one counter: every CPU :class:`TransformersBackend` generate goes through it."""
