"""A vLLM-like engine in virtual time: prefill and decode rates, a batch-dependent decode speed,
a limit on running sequences with a waiting queue, prefix caching, and a time-compression factor.

The model (a fluid model of continuous batching; docs/scale.md gives the figures it comes from):

- at most ``max_num_seqs`` sequences run (vLLM's default 256); later requests wait, first come
  first served, and are admitted as running ones finish;
- a newly admitted sequence is prefilled first: ``uncached prompt tokens / prefill_tokens_per_s``
  of engine time, one sequence after another, during which no sequence decodes (vLLM's
  prefill-first scheduling; the total engine time is the same with chunked prefill);
- otherwise every running sequence gains one token per ``tpot(b) = decode_base_s +
  decode_per_seq_s * b`` seconds, ``b`` the number of decoding sequences (the time per output
  token grows linearly with the batch; the batch's throughput ``b / tpot(b)`` saturates);
- ``compression`` divides every duration: one virtual second lasts ``1 / compression`` real
  seconds, and all figures the engine reports are virtual.

Work is tracked by a virtual decode clock (tokens decoded per sequence so far) and a heap of
finish marks, so an event costs O(log n) whatever the batch.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class EngineModel:
    """Timing parameters of one simulated server (defaults: a 7B model on one A100-80GB, vLLM 0.6)."""

    decode_base_s: float = 0.01044
    decode_per_seq_s: float = 0.0000907
    prefill_tokens_per_s: float = 12_300.0
    max_num_seqs: int = 256
    prefix_caching: bool = True
    compression: float = 1.0

    def __post_init__(self) -> None:
        if min(self.decode_base_s, self.prefill_tokens_per_s, self.compression) <= 0 or self.decode_per_seq_s < 0:
            raise ValueError(f"engine timings must be positive: {self}")
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")

    def tpot(self, batch: int) -> float:
        """Virtual seconds per output token of each sequence when ``batch`` sequences decode."""
        return self.decode_base_s + self.decode_per_seq_s * batch

    def throughput(self, batch: int) -> float:
        """Output tokens per virtual second of the whole batch."""
        return batch / self.tpot(batch)

    def service_s(self, prompt_tokens: int, completion_tokens: int, *, batch: int) -> float:
        """Engine seconds one request needs at a steady ``batch``: its prefill plus its share of decoding."""
        return prompt_tokens / self.prefill_tokens_per_s + completion_tokens * self.tpot(batch) / batch

    def to_dict(self) -> dict[str, float | int | bool]:
        return asdict(self)


@dataclass
class _Sequence:
    prefill_s: float
    decode_tokens: int
    future: asyncio.Future
    arrived_v: float
    admitted_v: float = 0.0


@dataclass
class EngineStats:
    """Totals of one engine, in virtual seconds and tokens."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    busy_s: float = 0.0  # time with at least one sequence admitted
    prefill_s: float = 0.0
    queue_wait_s: float = 0.0  # summed over requests: arrival to admission
    peak_running: int = 0
    peak_waiting: int = 0
    first_arrival_v: float | None = None
    last_finish_v: float = 0.0

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


class VirtualEngine:
    """One server's engine; ``await engine.serve(prompt, cached, completion)`` returns its virtual latency."""

    def __init__(self, model: EngineModel):
        self.model = model
        self.stats = EngineStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._origin = 0.0
        self._last_v = 0.0
        self._decoded = 0.0  # tokens each decoding sequence has gained since the start
        self._decoding: list[tuple[float, int, _Sequence]] = []  # heap of (finish mark, order, sequence)
        self._prefilling: deque[_Sequence] = deque()
        self._waiting: deque[_Sequence] = deque()
        self._order = itertools.count()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def now(self) -> float:
        """Virtual seconds since the engine started."""
        assert self._loop is not None
        return (self._loop.time() - self._origin) * self.model.compression

    @property
    def running(self) -> int:
        return len(self._decoding) + len(self._prefilling)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._origin = self._loop.time()
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="simserver-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def serve(self, prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> float:
        """Run one request through the engine; returns its virtual latency (queue + prefill + decode)."""
        assert self._loop is not None and self._wake is not None, "start() the engine first"
        self._advance(self.now())
        arrived = self._last_v
        stats = self.stats
        stats.requests += 1
        stats.prompt_tokens += prompt_tokens
        stats.cached_tokens += cached_tokens
        stats.completion_tokens += completion_tokens
        if stats.first_arrival_v is None:
            stats.first_arrival_v = arrived
        uncached = max(0, prompt_tokens - cached_tokens)
        prefill_s = uncached / self.model.prefill_tokens_per_s
        sequence = _Sequence(prefill_s, max(1, completion_tokens), self._loop.create_future(), arrived)
        self._waiting.append(sequence)
        self._admit()
        self._wake.set()
        await sequence.future
        return self._last_v - arrived

    def _admit(self) -> None:
        while self._waiting and self.running < self.model.max_num_seqs:
            sequence = self._waiting.popleft()
            sequence.admitted_v = self._last_v
            self.stats.queue_wait_s += self._last_v - sequence.arrived_v
            self._prefilling.append(sequence)
        self.stats.peak_running = max(self.stats.peak_running, self.running)
        self.stats.peak_waiting = max(self.stats.peak_waiting, len(self._waiting))

    def _advance(self, now_v: float) -> None:
        """Bring the engine's state forward to virtual time ``now_v``, finishing what is due."""
        elapsed = now_v - self._last_v
        while elapsed > 0 and self.running:
            if self._prefilling:
                head = self._prefilling[0]
                spent = min(elapsed, head.prefill_s)
                head.prefill_s -= spent
                self._tick(spent, prefill=True)
                elapsed -= spent
                if head.prefill_s <= 1e-12:
                    self._prefilling.popleft()
                    heapq.heappush(self._decoding, (self._decoded + head.decode_tokens, next(self._order), head))
                continue
            rate = 1.0 / self.model.tpot(len(self._decoding))
            mark = self._decoding[0][0]
            due = (mark - self._decoded) / rate
            if due <= elapsed:
                self._decoded = mark
                self._tick(due)
                elapsed -= due
                while self._decoding and self._decoding[0][0] <= self._decoded + 1e-9:
                    _, _, done = heapq.heappop(self._decoding)
                    if not done.future.done():
                        done.future.set_result(None)
                self.stats.last_finish_v = self._last_v
                self._admit()
            else:
                self._decoded += elapsed * rate
                self._tick(elapsed)
                elapsed = 0.0
        self._last_v = max(self._last_v, now_v)

    def _tick(self, seconds: float, *, prefill: bool = False) -> None:
        self._last_v += seconds
        self.stats.busy_s += seconds
        if prefill:
            self.stats.prefill_s += seconds

    def _next_event_v(self) -> float | None:
        if self._prefilling:
            return self._last_v + self._prefilling[0].prefill_s
        if self._decoding:
            return self._last_v + (self._decoding[0][0] - self._decoded) * self.model.tpot(len(self._decoding))
        return None

    async def _run(self) -> None:
        assert self._wake is not None and self._loop is not None
        while True:
            self._advance(self.now())
            due = self._next_event_v()
            self._wake.clear()
            timer = None
            if due is not None:
                timer = self._loop.call_later(max(0.0, (due - self.now()) / self.model.compression), self._wake.set)
            await self._wake.wait()
            if timer is not None:
                timer.cancel()
