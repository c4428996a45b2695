"""The loopback chat server in a forked process of its own, as the throughput benchmarks use it
(the server's CPU then does not slow the client being measured), and the backend spec that talks
to it::

    with LoopbackProcess(latency_s=1.0, reply=my_reply) as server:
        runtime = LLMRuntime(LLMConfig(default=loopback_spec(server.url, concurrency=64), cache=None))
        ...
        calls = server.stop()          # requests the server answered

or ``server = LoopbackProcess(latency_s=1.0).start()`` ... ``server.stop()`` without a block.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from typing import Any

from pipelines.llm.config import OpenAIBackendConfig
from pipelines.llm.loopback import LoopbackServer, echo_reply


def _serve(latency_s: float, reply: Callable[[dict], str], conn: Any) -> None:
    """Child process: serve until told to stop, then send back the request count."""

    async def run() -> None:
        async with LoopbackServer(latency_s=latency_s, reply=reply, record=False) as server:
            conn.send(server.url)
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)
            conn.send(server.count)

    asyncio.run(run())


class LoopbackProcess:
    """A :class:`LoopbackServer` answering after ``latency_s`` with ``reply(body)``, in a forked process."""

    def __init__(self, *, latency_s: float, reply: Callable[[dict], str] = echo_reply):
        context = multiprocessing.get_context("fork")
        self._parent, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(latency_s, reply, child), daemon=True)
        self.url = ""
        self.calls: int | None = None

    def start(self) -> LoopbackProcess:
        """Start the server process and wait until it listens (``url`` is then set)."""
        self._process.start()
        self.url = self._parent.recv()
        return self

    def __enter__(self) -> LoopbackProcess:
        return self.start()

    def stop(self) -> int:
        """Stop the server; returns the number of requests it answered."""
        if self.calls is None:
            self._parent.send("stop")
            self.calls = self._parent.recv()
            self._process.join(timeout=5)
        return self.calls

    def __exit__(self, *exc: object) -> None:
        if self.calls is None and self._process.is_alive():
            self.stop()


def loopback_spec(url: str, *, concurrency: int, **overrides: Any) -> OpenAIBackendConfig:
    """An ``openai`` backend spec for a loopback server: no key, no retries, ``concurrency`` in flight."""
    fields = {"kind": "openai", "model": "loopback", "base_urls": [url], "api_key_env": None, "max_retries": 0}
    return OpenAIBackendConfig(**(fields | {"max_concurrency": concurrency} | overrides))
