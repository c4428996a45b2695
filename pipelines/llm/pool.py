"""A pool of equivalent servers (several base URLs serving one model), least-outstanding first.

``acquire`` picks the server with the fewest requests in flight, skipping servers the current
request already failed on and, while others are healthy, servers that failed recently (they
cool down for ``cooldown_s``). Ties go round-robin so sequential traffic is spread too.

    pool = ServerPool(["http://a/v1", "http://b/v1"])
    server, started = pool.acquire(exclude=tried), pool.now()
    try: ... finally: pool.release(server, ok=True, started=started)

A success clears a server's cooldown only if that attempt started after the cooldown began: a
slow request that went out before the server failed says nothing about its health now.
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


class ServerPool:
    """Least-outstanding-requests choice among ``urls``; a failing server is avoided for a while."""

    def __init__(self, urls: list[str], *, cooldown_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        if not urls:
            raise ValueError("a server pool needs at least one base url")
        self.servers = [Server(url) for url in urls]
        self.cooldown_s = cooldown_s
        self.now = clock
        self._turn = 0

    def acquire(self, exclude: set[str] | frozenset[str] = frozenset()) -> Server:
        """The server for the next attempt; counts it as outstanding until :meth:`release`."""
        if len(self.servers) == 1:
            server = self.servers[0]
            server.outstanding += 1
            server.requests += 1
            return server
        now = self.now()
        candidates = [s for s in self.servers if s.url not in exclude] or self.servers
        healthy = [s for s in candidates if s.down_until <= now] or candidates
        n = len(self.servers)
        self._turn = (self._turn + 1) % n
        order = {s.url: (i - self._turn) % n for i, s in enumerate(self.servers)}
        server = min(healthy, key=lambda s: (s.outstanding, order[s.url]))
        server.outstanding += 1
        server.requests += 1
        return server

    def release(self, server: Server, *, ok: bool, started: float) -> None:
        """End one attempt on ``server`` that began at ``started`` (``pool.now()`` at acquire).

        ``ok=False`` (connection error, 5xx) starts its cooldown; ``ok=True`` ends a cooldown only
        when the attempt started after that cooldown began.
        """
        server.outstanding -= 1
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
