"""A small OpenAI-compatible chat server on loopback, for tests and benchmarks of HTTP backends.

It answers ``POST /v1/chat/completions`` after a fixed ``latency_s`` with ``reply(body)`` (default:
echo the last user message), reports word-count usage (``usage=False``: none, as some servers),
records every request body and counts requests in flight; ``require_key`` answers 401 to any request
without ``Authorization: Bearer <require_key>``; ``max_choices`` caps the choices per reply (as
servers that ignore ``n``); ``models`` lists the names served (``GET /v1/models``) and answers 404
to a request for another, as ``vllm serve`` does (default: any name, an empty list). Faults are
injected per request, either as a script consumed in order (``faults=[Fault.http(429,
retry_after="1"), None, ...]``, ``None`` = answer normally) or as a function ``faults(index, body)
-> Fault | None``:

- ``Fault.http(status, message=..., retry_after=..., code=...)``: an HTTP error with an OpenAI-style
  body (``error.code`` = ``code``, default the status);
- ``Fault.slow(seconds)``: answer normally, but only after ``seconds``;
- ``Fault.malformed()``: status 200 with a body that is not JSON;
- ``Fault.drop()``: close the connection without answering.

In code::

    async with LoopbackServer(latency_s=0.05, faults=[Fault.http(500)]) as srv:
        backend = OpenAIBackend(OpenAIBackendConfig(kind="openai", model="m", base_urls=[srv.url]))

From the command line (prints ``READY <url>`` once listening, serves until killed)::

    python -m pipelines.llm.loopback --port 0 --latency 1.0 --no-record
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

import orjson
from aiohttp import web


@dataclass(frozen=True)
class Fault:
    """One injected failure: ``kind`` is ``status``, ``slow``, ``malformed`` or ``drop``."""

    kind: str
    status: int = 500
    message: str = "injected failure"
    retry_after: str | None = None
    delay_s: float = 0.0
    code: str | None = None

    @classmethod
    def http(
        cls, status: int, message: str = "injected failure", retry_after: str | None = None, code: str | None = None
    ) -> Fault:
        return cls("status", status=status, message=message, retry_after=retry_after, code=code)

    @classmethod
    def slow(cls, delay_s: float) -> Fault:
        return cls("slow", delay_s=delay_s)

    @classmethod
    def malformed(cls) -> Fault:
        return cls("malformed")

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop")


FaultPlan = Union[Iterable[Union[Fault, None]], Callable[[int, dict], Union[Fault, None]], None]
ReplyFn = Callable[[dict], str]


def echo_reply(body: dict) -> str:
    """Default reply: ``echo: <last user message>``; for a ``response_format`` ``json_schema``, the
    smallest instance of the schema (a server that enforces schemas; ``reply=plain_echo`` ignores them)."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema") or {}
        return orjson.dumps(smallest_instance(schema, schema)).decode()
    return plain_echo(body)


def plain_echo(body: dict) -> str:
    """``echo: <last user message>`` whatever the request asks for (a server that ignores schemas)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return f"echo: {message.get('content', '')}"
    return "echo:"


def smallest_instance(node: Any, root: dict[str, Any]) -> Any:
    """A small value that ``node`` (a JSON schema; ``$ref`` resolved in ``root``) accepts, for the
    common keywords (const, enum, anyOf/oneOf/allOf, type, required, minItems, minLength, minimum)."""
    if not isinstance(node, dict):
        return None
    if "$ref" in node:
        target: Any = root
        for part in str(node["$ref"]).lstrip("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return smallest_instance(target, root)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if node.get(key):
            return smallest_instance(node[key][0], root)
    kind = node.get("type")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object" or "properties" in node:
        properties = node.get("properties") or {}
        return {name: smallest_instance(properties.get(name, {}), root) for name in node.get("required") or []}
    if kind == "array":
        return [smallest_instance(node.get("items") or {}, root) for _ in range(int(node.get("minItems") or 0))]
    if kind == "string":
        return "x" * max(1, int(node.get("minLength") or 1))
    if kind in ("integer", "number"):
        return node.get("minimum", 0)
    return True if kind == "boolean" else None


class LoopbackServer:
    """The server; use ``async with`` (or ``await start()`` / ``await stop()``), then ``url``."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        reply: ReplyFn = echo_reply,
        faults: FaultPlan = None,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
        usage: bool = True,
        require_key: str | None = None,
        max_choices: int | None = None,
        models: Sequence[str] | None = None,
    ):
        self.latency_s = latency_s
        self.models = list(models) if models is not None else None  # None: any name (an empty /models list)
        self.usage = usage
        self.require_key = require_key
        self.max_choices = max_choices
        self.reply = reply
        self.host = host
        self.port = port
        self.record = record
        self._fault_fn = faults if callable(faults) else None
        self._fault_script = list(faults) if faults is not None and not callable(faults) else []
        self.requests: list[dict[str, Any]] = []  # {"body", "authorization", "time"} per request
        self.count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:<port>/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def _next_fault(self, index: int, body: dict) -> Fault | None:
        if self._fault_fn is not None:
            return self._fault_fn(index, body)
        return self._fault_script.pop(0) if self._fault_script else None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        index = self.count
        self.count += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            raw = await request.read()
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return _error(400, "request body is not JSON")
            if self.record:
                auth = request.headers.get("Authorization")
                self.requests.append({"body": body, "authorization": auth, "time": time.monotonic()})
            if not self._authorized(request):
                return _error(401, "invalid api key")
            if self.models is not None and body.get("model") not in self.models:  # as vLLM answers
                return _error(404, f"The model `{body.get('model')}` does not exist.", code="NotFoundError")
            fault = self._next_fault(index, body)
            if fault is not None and fault.kind == "drop":
                if request.transport is not None:
                    request.transport.abort()
                return web.Response(status=500)
            if fault is not None and fault.kind == "status":
                headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
                return _error(fault.status, fault.message, headers, code=fault.code)
            delay = self.latency_s + (fault.delay_s if fault is not None and fault.kind == "slow" else 0.0)
            if delay > 0:
                await asyncio.sleep(delay)
            if fault is not None and fault.kind == "malformed":
                return web.Response(status=200, body=b'{"choices": [{"message": ', content_type="application/json")
            return web.Response(body=orjson.dumps(self._completion(body, index)), content_type="application/json")
        finally:
            self.in_flight -= 1

    def _authorized(self, request: web.Request) -> bool:
        return self.require_key is None or request.headers.get("Authorization") == f"Bearer {self.require_key}"

    def _completion(self, body: dict, index: int) -> dict[str, Any]:
        n = int(body.get("n") or 1)
        n = min(n, self.max_choices) if self.max_choices else n
        texts = [self.reply(body) for _ in range(n)]
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
        completion = {
            "id": f"chatcmpl-loopback-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "loopback"),
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                for i, text in enumerate(texts)
            ],
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": sum(len(t.split()) for t in texts),
                "total_tokens": prompt_words + sum(len(t.split()) for t in texts),
            },
        }
        if not self.usage:
            del completion["usage"]
        return completion

    async def _models(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _error(401, "invalid api key")
        served = self.models or []
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"} for name in served]})

    async def start(self) -> LoopbackServer:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", lambda request: web.Response(text="ok"))
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> LoopbackServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _error(
    status: int, message: str, headers: dict[str, str] | None = None, *, code: str | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": "loopback_error", "code": code if code is not None else status}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json", headers=headers)


async def _serve(args: argparse.Namespace) -> None:
    server = LoopbackServer(
        latency_s=args.latency, host=args.host, port=args.port, record=not args.no_record, models=args.served_model_name
    )
    await server.start()
    print(f"READY {server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print(f"served {server.count} requests, at most {server.max_in_flight} at once", file=sys.stderr, flush=True)
    await server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible loopback chat server (tests, benchmarks)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port (printed on the READY line)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--no-record", action="store_true", help="do not keep request bodies in memory")
    parser.add_argument(
        "--served-model-name", nargs="+", default=None, metavar="NAME",
        help="serve only these model names (as vllm serve does; other names get 404); default: any name",
    )
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
