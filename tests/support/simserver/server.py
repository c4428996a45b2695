"""The simulated OpenAI-compatible inference server: HTTP on top of :class:`Completer` and
:class:`VirtualEngine`.

Endpoints: ``POST /v1/chat/completions`` (replies valid for the request's JSON schema, usage in
every reply, timing from the engine model), ``GET /v1/models``, ``GET /health`` and ``GET
/sim/stats`` (the engine's virtual-time totals, request counts, the model's parameters). Optional
faults at set rates, drawn per request from a seeded generator (so a retry can succeed): HTTP 429
with ``Retry-After``, HTTP 500/503, and 429 when more than ``max_waiting`` requests wait. A request
log (JSON lines, one per answered or refused request) can be written for counting what was sent.

More endpoints (a provider batch API) are added with :meth:`SimServer.add_routes`; they can answer
through :attr:`SimServer.completer` and queue work on :attr:`SimServer.engine`.

    async with SimServer(EngineModel(compression=20)) as server:
        ... OpenAI-compatible backend with base_urls=[server.url] ...
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import orjson
from aiohttp import web

from tests.support.simserver.completion import Completer, PrefixCache, ReplyFn
from tests.support.simserver.engine import EngineModel, VirtualEngine
from tests.support.simserver.text import count_tokens

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Faults:
    """Failure rates per request (0 = never): 429s, 5xx, and a waiting-queue bound (None = none)."""

    rate_429: float = 0.0
    rate_5xx: float = 0.0
    retry_after_s: float = 1.0
    max_waiting: int | None = None
    seed: int = 0


class SimServer:
    """One simulated server on ``host:port`` (0 = any free port; ``url`` after start)."""

    def __init__(
        self,
        model: EngineModel | None = None,
        *,
        faults: Faults | None = None,
        reply: ReplyFn | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | str | None = None,
        name: str = "sim",
        prefix_cache_tokens: int = 400_000,
        served_model_names: tuple[str, ...] = ("simulated",),
    ):
        self.model = model or EngineModel()
        self.faults = faults or Faults()
        self.engine = VirtualEngine(self.model)
        cache = PrefixCache(prefix_cache_tokens) if self.model.prefix_caching else None
        self.completer = Completer(reply=reply, prefix_cache=cache)
        self.host, self.port, self.name = host, port, name
        self.served_model_names = tuple(served_model_names)  # GET /v1/models, as vllm's --served-model-name
        self.log_path = Path(log_path) if log_path else None
        self._log: IO[bytes] | None = None
        self._rng = random.Random(self.faults.seed)
        self._routes: list[tuple[str, str, Handler]] = [
            ("POST", "/v1/chat/completions", self._chat),
            ("GET", "/v1/models", self._models),
            ("GET", "/health", self._health),
            ("GET", "/sim/stats", self._stats),
        ]
        self.counts = {"requests": 0, "answered": 0, "refused_429": 0, "refused_5xx": 0, "bad_request": 0}
        self.in_flight = 0
        self.max_in_flight = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def add_routes(self, routes: list[tuple[str, str, Handler]]) -> None:
        """More endpoints, e.g. ``[("POST", "/v1/batches", handler)]``; before :meth:`start`."""
        if self._runner is not None:
            raise RuntimeError("add routes before the server starts")
        self._routes.extend(routes)

    def stats(self) -> dict[str, Any]:
        """Counts, engine totals and the model; the request log is flushed to disk first."""
        if self._log is not None:
            self._log.flush()
        return {
            "name": self.name,
            "url": self.url,
            "model": self.model.to_dict(),
            "faults": asdict(self.faults),
            "counts": dict(self.counts),
            "max_in_flight": self.max_in_flight,
            "engine": self.engine.stats.to_dict(),
            "virtual_now_s": self.engine.now() if self._runner is not None else None,
        }

    def _write_log(self, **row: Any) -> None:
        if self._log is not None:
            self._log.write(orjson.dumps(row) + b"\n")

    async def _chat(self, request: web.Request) -> web.Response:
        index = self.counts["requests"]
        self.counts["requests"] += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        started = time.monotonic()
        try:
            raw = await request.read()
            try:
                body = orjson.loads(raw)
                prepared = self.completer.prepare(body, raw)
            except (orjson.JSONDecodeError, ValueError, TypeError, KeyError) as exc:
                self.counts["bad_request"] += 1
                return _error(400, f"bad request: {exc}")
            refusal = self._fault()
            if refusal is not None:
                status, message, headers = refusal
                self._write_log(i=index, status=status, hash=prepared.body_hash, t=round(started, 4))
                return _error(status, message, headers)
            latency_v = await self.engine.serve(
                prepared.prompt_tokens, prepared.cached_tokens, prepared.completion_tokens
            )
            reply = self.completer.completion_body(body, prepared, index, int(time.time()))
            self.counts["answered"] += 1
            self._write_log(
                i=index,
                status=200,
                hash=prepared.body_hash,
                t=round(started, 4),
                v=round(latency_v, 4),
                prompt=prepared.prompt_tokens,
                cached=prepared.cached_tokens,
                completion=prepared.completion_tokens,
            )
            return web.Response(body=orjson.dumps(reply), content_type="application/json")
        finally:
            self.in_flight -= 1

    def _fault(self) -> tuple[int, str, dict[str, str] | None] | None:
        faults = self.faults
        if faults.max_waiting is not None and self.engine.waiting >= faults.max_waiting:
            self.counts["refused_429"] += 1
            return 429, "server overloaded: too many requests waiting", {"Retry-After": f"{faults.retry_after_s:g}"}
        draw = self._rng.random()
        if draw < faults.rate_429:
            self.counts["refused_429"] += 1
            return 429, "rate limit reached (simulated)", {"Retry-After": f"{faults.retry_after_s:g}"}
        if draw < faults.rate_429 + faults.rate_5xx:
            self.counts["refused_5xx"] += 1
            return (503 if draw < faults.rate_429 + faults.rate_5xx / 2 else 500), "server error (simulated)", None
        return None

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": name, "object": "model"} for name in self.served_model_names]
        return web.json_response({"object": "list", "data": data})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _stats(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(self.stats()), content_type="application/json")

    async def start(self) -> SimServer:
        app = web.Application(client_max_size=64 * 1024**2)
        for method, path, handler in self._routes:
            app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
        await site.start()
        self.port = self._runner.addresses[0][1]
        count_tokens(["load the tokenizer before the first request"])
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("ab", buffering=1024 * 1024)
        self.engine.start()
        return self

    async def stop(self) -> None:
        await self.engine.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._log is not None:
            self._log.close()
            self._log = None

    async def __aenter__(self) -> SimServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"error": {"message": message, "type": "simulated_error", "code": status}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json", headers=headers)
