"""A pool of equivalent servers (several base URLs serving one model), least-outstanding first.

``acquire`` picks the server with the fewest requests in flight, skipping servers the current
request already failed on and, while others are healthy, servers that failed recently (they
cool down for ``cooldown_s``). Ties go round-robin so sequential traffic is spread too.

    pool = ServerPool(["http://a/v1", "http://b/v1"])
    server, started = pool.acquire(exclude=tried), pool.now()
    try: ... finally: pool.release(server, ok=True, started=started)

A success clears a server's cooldown only if that attempt started after the cooldown began: a
slow request that went out before the server failed says nothing about its health now.

Circuit breaker: ``trip_after`` attempts in a row on one server that got no answer at all
(``release(..., unanswered="why")``: refused or dropped connections, timeouts) take that server
out of the pool for the rest of the run; once every server is out, ``acquire`` raises
:class:`PoolDown` naming them and what failed, so the calls still pending fail at once instead of
each running its retries against a dead server. Any answer (an HTTP error too) resets the count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Server:
    """One base URL and its live counters."""

    url: str
    outstanding: int = 0
    requests: int = 0
    failures: int = 0
    down_until: float = 0.0
    down_since: float = float("-inf")  # when the current cooldown began
    unanswered: int = 0  # attempts in a row that got no answer (circuit breaker)
    tripped: str | None = None  # why the breaker took this server out; None while in use


class PoolDown(Exception):
    """Every server of the pool is out (circuit breaker); the message names them and what failed."""


class ServerPool:
    """Least-outstanding-requests choice among ``urls``; a failing server is avoided for a while."""

    def __init__(
        self,
        urls: list[str],
        *,
        cooldown_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        trip_after: int | None = None,
    ):
        if not urls:
            raise ValueError("a server pool needs at least one base url")
        self.servers = [Server(url) for url in urls]
        self.cooldown_s = cooldown_s
        self.trip_after = trip_after
        self.now = clock
        self._turn = 0

    def acquire(self, exclude: set[str] | frozenset[str] = frozenset()) -> Server:
        """The server for the next attempt; counts it as outstanding until :meth:`release`. Raises
        :class:`PoolDown` when the breaker has taken every server out."""
        live = [s for s in self.servers if s.tripped is None]
        if not live:
            raise PoolDown("; ".join(f"{s.url}: {s.tripped}" for s in self.servers))
        if len(live) == 1:
            server = live[0]
            server.outstanding += 1
            server.requests += 1
            return server
        now = self.now()
        candidates = [s for s in live if s.url not in exclude] or live
        healthy = [s for s in candidates if s.down_until <= now] or candidates
        n = len(self.servers)
        self._turn = (self._turn + 1) % n
        order = {s.url: (i - self._turn) % n for i, s in enumerate(self.servers)}
        server = min(healthy, key=lambda s: (s.outstanding, order[s.url]))
        server.outstanding += 1
        server.requests += 1
        return server

    def release(
        self, server: Server, *, ok: bool, started: float, unanswered: str | None = None, neutral: bool = False
    ) -> None:
        """End one attempt on ``server`` that began at ``started`` (``pool.now()`` at acquire).

        ``ok=False`` (connection error, 5xx) starts its cooldown; ``ok=True`` ends a cooldown only
        when the attempt started after that cooldown began. ``unanswered`` (why the attempt got no
        answer) counts toward the breaker; None (any answer) resets its count; ``neutral`` (a
        cancelled attempt, a timeout the breaker leaves aside) does neither.
        """
        server.outstanding -= 1
        if neutral:
            pass
        elif unanswered is None:
            server.unanswered = 0
        else:
            server.unanswered += 1
            if self.trip_after is not None and server.unanswered >= self.trip_after and server.tripped is None:
                server.tripped = f"{server.unanswered} attempts in a row got no answer (last: {unanswered})"
        if ok:
            if started > server.down_since:
                server.down_until = 0.0
        else:
            server.failures += 1
            server.down_since = self.now()
            server.down_until = server.down_since + self.cooldown_s

    def stats(self) -> dict[str, dict[str, int]]:
        """Requests and failures per base URL (for logs and tests)."""
        return {s.url: {"requests": s.requests, "failures": s.failures} for s in self.servers}
