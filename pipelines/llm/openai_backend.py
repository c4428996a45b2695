"""Backend for any OpenAI-compatible chat server (OpenAI, GLM, DeepSeek, vLLM serve, transformers serve).

Plain aiohttp (the openai SDK's per-request CPU cost is too high for thousands of calls in flight):
one shared ``ClientSession`` whose connector holds ``max_concurrency`` connections, requests
encoded and replies decoded with orjson. Each call::

    POST {base_url}/chat/completions   {model, messages, temperature, top_p, max_tokens, stop, seed, n,
                                        response_format (from SamplingParams.json_schema)}

is bounded by ``max_concurrency``, paced by the ``requests_per_minute`` / ``tokens_per_minute``
limits, sent to the least-loaded server of the ``base_urls`` pool and retried with exponential
backoff and full jitter on 429, 408, 5xx, timeouts, dropped connections and malformed replies
(``Retry-After`` is honoured). Other 4xx fail at once. Every failure raises :class:`LLMError`
naming the server, the status and the server's message; the API key (read from the environment
variable ``api_key_env``) never appears in errors or logs.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import re
import time
from typing import Any

import aiohttp
import orjson

from pipelines.llm.config import OpenAIBackendConfig
from pipelines.llm.pool import ServerPool
from pipelines.llm.ratelimit import RateLimiter, estimate_tokens
from pipelines.llm.types import ChatResult, Choice, LLMError, Message, SamplingParams, Usage

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 524, 529})
"""Statuses worth another attempt; any other non-2xx status fails at once."""


class _Retryable(Exception):
    """An attempt failed in a way another attempt may fix; ``retry_after`` is the server's hint."""

    def __init__(self, message: str, retry_after: float | None = None, server_fault: bool = True):
        super().__init__(message)
        self.retry_after = retry_after
        self.server_fault = server_fault


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def response_format(schema: dict[str, Any] | None, mode: str) -> dict[str, Any] | None:
    """The ``response_format`` field for ``schema`` under ``structured_output`` mode, or None."""
    if schema is None or mode == "none":
        return None
    if mode == "json_object":
        return {"type": "json_object"}
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "response"))[:64]
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


def _server_message(body: bytes) -> str:
    """The human part of an error reply: ``error.message``, ``error``, ``detail``, or the raw text."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").strip()[:500]
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message") or error
        if error is not None:
            return str(error)[:500]
    return str(data)[:500]


def parse_completion(data: Any, default_model: str) -> ChatResult:
    """A :class:`ChatResult` from a decoded ``chat.completion`` body; raises ``ValueError`` if malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ValueError("reply has no 'choices' list")
    choices = []
    for item in sorted(data["choices"], key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0):
        message = item.get("message") if isinstance(item, dict) else None
        if not isinstance(message, dict):
            raise ValueError("a choice has no 'message' object")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"message content is {type(content).__name__}, not text")
        choices.append(Choice(text=content or "", finish_reason=item.get("finish_reason") or "unknown"))
    usage = data.get("usage") or {}
    return ChatResult(
        choices=choices,
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        ),
        model=str(data.get("model") or default_model),
    )


class OpenAIBackend:
    """:class:`~pipelines.llm.types.Backend` for OpenAI-compatible servers; see the module docstring."""

    def __init__(self, spec: OpenAIBackendConfig):
        self.spec = spec
        self.identity = f"openai:{spec.model}#{spec.structured_output}"
        self._api_key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        if spec.api_key_env and not self._api_key:
            log.warning("%s is not set: requests to %s go without an API key", spec.api_key_env, spec.model)
        self._headers = {"Content-Type": "application/json"}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        self.pool = ServerPool(spec.base_urls)
        self.limiter = RateLimiter(spec.requests_per_minute, spec.tokens_per_minute)
        self._semaphore: asyncio.Semaphore | None = None
        self._timeout = aiohttp.ClientTimeout(total=spec.timeout_s, sock_connect=spec.connect_timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.retries = 0  # attempts beyond the first, over the backend's life

    def _scrub(self, text: str) -> str:
        """``text`` with the API key blanked out (servers sometimes echo request headers)."""
        return text.replace(self._api_key, "***") if self._api_key else text

    def _bind_loop(self) -> None:
        """Session and semaphore belong to one event loop; a backend reused under a new loop gets new ones."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._semaphore = asyncio.Semaphore(self.spec.max_concurrency)
            self._session = None

    def _session_for_loop(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.spec.max_concurrency, limit_per_host=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                cookie_jar=aiohttp.DummyCookieJar(),  # an API client needs no cookies; skips per-request filtering
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    def payload(self, messages: list[Message], params: SamplingParams) -> dict[str, Any]:
        """The JSON body of a chat request (optional fields only when set)."""
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": messages,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if params.n != 1:
            body["n"] = params.n
        fmt = response_format(params.json_schema, self.spec.structured_output)
        if fmt is not None:
            body["response_format"] = fmt
        return body

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResult:
        """Send one chat request (with retries); raises :class:`LLMError` when it fails for good."""
        self._bind_loop()
        tried: set[str] = set()
        last_error = ""
        async with self._semaphore:
            # encode only once a slot is free: with thousands of calls queued, the work then overlaps the
            # network wait of the calls in flight instead of delaying the first of them
            body = orjson.dumps(self.payload(messages, params))
            estimate = estimate_tokens(messages, params) if self.limiter.tokens is not None else 0
            for attempt in range(self.spec.max_retries + 1):
                if self.limiter.active:  # tokens are reserved once per request (settled after success)
                    await self.limiter.acquire(estimate if attempt == 0 else 0)
                server = self.pool.acquire(exclude=tried)
                try:
                    result = await self._attempt(server.url, body)
                except _Retryable as exc:
                    self.pool.release(server, ok=not exc.server_fault)
                    if exc.server_fault:
                        tried.add(server.url)
                    if len(tried) >= len(self.pool.servers):
                        tried.clear()
                    last_error = self._scrub(str(exc))
                    if attempt == self.spec.max_retries:
                        break
                    delay = self._backoff(attempt, exc.retry_after)
                    self.retries += 1
                    log.warning(
                        "%s: %s; retry %d/%d in %.2fs",
                        self.spec.model,
                        last_error,
                        attempt + 1,
                        self.spec.max_retries,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    continue
                except BaseException:  # a final LLMError, or the caller cancelled us: free the slot, pass it on
                    self.pool.release(server, ok=True)
                    raise
                self.pool.release(server, ok=True)
                if self.limiter.tokens is not None:
                    self.limiter.settle(estimate, result.usage.prompt_tokens + result.usage.completion_tokens)
                return result
        raise LLMError(
            f"openai backend ({self.spec.model}): gave up after {self.spec.max_retries + 1} attempts; "
            f"last error: {last_error}"
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Full-jitter exponential backoff; a server's ``Retry-After`` is a lower bound."""
        ceiling = min(self.spec.backoff_max_s, self.spec.backoff_base_s * (2**attempt))
        delay = random.uniform(0, ceiling)
        return max(delay, retry_after) if retry_after is not None else delay

    async def _attempt(self, url: str, body: bytes) -> ChatResult:
        """One POST to ``url``; raises ``_Retryable`` for transient failures, ``LLMError`` for final ones."""
        session = self._session_for_loop()
        endpoint = url + "/chat/completions"
        try:
            async with session.post(endpoint, data=body, headers=self._headers) as response:
                raw = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except TimeoutError as exc:
            raise _Retryable(f"{url}: no reply within {self.spec.timeout_s}s") from exc
        except aiohttp.ClientError as exc:
            raise _Retryable(f"{url}: connection failed ({type(exc).__name__}: {self._scrub(str(exc))})") from exc
        if status != 200:
            message = self._scrub(_server_message(raw))
            if status in RETRYABLE_STATUS:
                raise _Retryable(
                    f"{url} answered HTTP {status}: {message}",
                    retry_after=parse_retry_after(retry_after),
                    server_fault=status >= 500,
                )
            raise LLMError(f"openai backend ({self.spec.model}): {url} answered HTTP {status}: {message}")
        try:
            return parse_completion(orjson.loads(raw), self.spec.model)
        except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as exc:
            snippet = self._scrub(raw[:200].decode("utf-8", "replace"))
            raise _Retryable(f"{url} sent a malformed reply ({exc}): {snippet!r}") from exc

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        if self._session is not None and not self._session.closed and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None
