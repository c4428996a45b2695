"""Backend for any OpenAI-compatible chat server (OpenAI, GLM, DeepSeek, vLLM serve, transformers serve).

Plain aiohttp (the openai SDK's per-request CPU cost is too high for thousands of calls in flight):
one shared ``ClientSession`` whose connector holds ``max_concurrency`` connections (unbounded when
it is None, the default: the stage's ``concurrency`` is the limit), requests encoded and replies
decoded with orjson. Each call::

    POST {base_url}/chat/completions   {model, messages, temperature, top_p, max_tokens, stop, seed, n,
                                        response_format (from SamplingParams.json_schema)}

is bounded by ``max_concurrency`` (a limit below what the stage sends is warned about once), paced
by the ``requests_per_minute`` / ``tokens_per_minute`` limits, sent to the least-loaded server of
the ``base_urls`` pool and retried with exponential backoff and full jitter on 429, 408, 5xx,
timeouts, dropped connections and malformed replies (``Retry-After`` is honoured up to
``max_retry_after_s``; a server asking for longer fails the call at once). Other 4xx, and 429s that
mean a quota or billing limit (OpenAI ``insufficient_quota``, GLM account codes), fail at once.
Every failure raises :class:`LLMError` naming the server, the status and the server's message; the
API key (read from the environment variable ``api_key_env``, which must be set when named) never
appears in errors or logs, and a warning says when it would travel over plain ``http://`` to a host
that is not loopback.

Structured output: ``json_schema`` is sent as ``response_format`` ``json_schema`` (with
``"strict": true`` where the schema meets OpenAI's strict rules); a server that refuses it gets
``json_object``, then the prompt alone, with one warning per server (the caller's parser still
validates the reply).

Overload and dead servers: once a reply times out, requests in flight are capped at half of what
was in flight, growing back by one per that many replies in time
(:class:`~pipelines.llm.ratelimit.AdaptiveLimit`; waiting for a slot is not part of
``timeout_s``). ``breaker_failures`` attempts in a row on one server that get no answer take it out
of the run; with every server out, every pending and later call fails at once with one message
naming the servers and what failed (:class:`~pipelines.llm.pool.ServerPool`).

``preflight`` checks each server before the run: ``GET /models`` (a name the server does not list
stops the run; a list it does not answer is a warning: "name not checked"), one tiny chat call
with the configured name (a name the server refuses stops the run with the fixes for that server),
and, for runs that send schemas, one schema-constrained call: a reply outside the schema stops
the run (the server ignores ``response_format``; every reply would go unparsed).

``mode: batch`` sends every call through the server's batch API instead
(:mod:`pipelines.llm.batch_mode`; docs/batch.md); its journal lies beside ``cache_path``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import aiohttp
import orjson

from pipelines.llm.batch_journal import journal_path
from pipelines.llm.batch_mode import BatchCollector
from pipelines.llm.config import OpenAIBackendConfig
from pipelines.llm.openai_protocol import (
    FALLBACK,
    FORMAT_REFUSAL,
    MODES,
    PERMANENT_429_CODES,
    RETRYABLE_STATUS,
    error_codes,
    parse_completion,
    parse_retry_after,
    plain_http_remote,
    reported_tokens,
    response_format,
    server_message,
)
from pipelines.llm.pool import PoolDown, ServerPool
from pipelines.llm.ratelimit import AdaptiveLimit, RateLimiter, estimate_tokens
from pipelines.llm.types import ChatResult, LLMError, Message, SamplingParams

log = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()  # (what, url): warnings given once per process


class _Retryable(Exception):
    """An attempt failed in a way another attempt may fix; ``retry_after`` is the server's hint."""

    def __init__(
        self, message: str, retry_after: float | None = None, server_fault: bool = True, *, unanswered: str = ""
    ):
        super().__init__(message)
        self.retry_after = retry_after
        self.server_fault = server_fault
        self.unanswered = unanswered  # "timeout" or "connection": no answer at all (the circuit breaker counts it)


class _FormatRefused(Exception):
    """The server refused the request's ``response_format``: try the next structured-output mode."""


class OpenAIBackend:
    """:class:`~pipelines.llm.types.Backend` for OpenAI-compatible servers; see the module docstring.

    ``where`` names the spec in params (``llm.default``, ``llm.roles.<role>``) for error messages.
    """

    watch_reasks = True  # a server may not sample as asked: re-asks it answers identically are skipped (client.py)

    def __init__(self, spec: OpenAIBackendConfig, *, where: str = "llm.default", cache_path: str | None = None):
        self.spec = spec
        self.where = where
        self.identity = f"openai:{spec.model}#{spec.structured_output}"
        self._api_key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        if spec.api_key_env and not self._api_key:
            raise LLMError(
                f"environment variable {spec.api_key_env} ({where}.api_key_env) is not set; export it, "
                "or set api_key_env: null for a server without keys"
            )
        self._headers = {"Content-Type": "application/json"}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
            for url in spec.base_urls:
                if plain_http_remote(url) and ("http", url) not in _warned:
                    _warned.add(("http", url))
                    log.warning(
                        "%s is plain http:// to a host that is not loopback: the API key from %s travels "
                        "unencrypted; use https:// or api_key_env: null",
                        url,
                        spec.api_key_env,
                    )
        self.pool = ServerPool(spec.base_urls, trip_after=spec.breaker_failures)
        self.gate = AdaptiveLimit()
        self._down: asyncio.Event | None = None  # set when the breaker has taken every server out
        self.limiter = RateLimiter(spec.requests_per_minute, spec.tokens_per_minute)
        self.format_mode = {url: spec.structured_output for url in spec.base_urls}  # lowered on refusal
        self._semaphore: asyncio.Semaphore | None = None
        self._timeout = aiohttp.ClientTimeout(total=spec.timeout_s, sock_connect=spec.connect_timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard: AsyncGenerator[None, None] | None = None
        self.retries = 0  # attempts beyond the first, over the backend's life
        self.identical_choices = 0  # sampled replies with n > 1 whose choices were all one text
        self.probes: list[ChatResult] = []  # the preflight's chat calls (the runtime counts their usage)
        self.batch = None
        if spec.mode == "batch":

            self.batch = BatchCollector(self, journal=journal_path(spec, where=where, cache_path=cache_path))

    @property
    def wants_request_key(self) -> bool:
        """Batch mode names each request by its cache key (``LLM`` passes ``key=``)."""
        return self.batch is not None

    def _scrub(self, text: str) -> str:
        """``text`` with the API key blanked out (servers sometimes echo request headers)."""
        return text.replace(self._api_key, "***") if self._api_key else text

    async def _bind_loop(self) -> None:
        """Session and semaphore belong to one event loop; a backend reused under a new loop gets new
        ones. The session is closed when its loop ends (``asyncio.run`` finalizes async generators
        before it closes the loop, which runs ``_close_at_loop_end``), or at the latest here."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            old, self._session = self._session, None
            old_guard, self._guard = self._guard, None
            self._loop = loop
            self._semaphore = asyncio.Semaphore(self.spec.max_concurrency) if self.spec.max_concurrency else None
            self._down = asyncio.Event()
            self.gate.bind()
            if old_guard is not None:
                await old_guard.aclose()
            await _close_session(old)
            self._guard = self._close_at_loop_end(loop)
            await self._guard.__anext__()

    async def _close_at_loop_end(self, loop: asyncio.AbstractEventLoop) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self._loop is loop:
                session, self._session = self._session, None
                await _close_session(session)

    def _session_for_loop(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.spec.max_concurrency or 0, limit_per_host=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                cookie_jar=aiohttp.DummyCookieJar(),  # an API client needs no cookies; skips per-request filtering
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    def payload(self, messages: list[Message], params: SamplingParams, mode: str | None = None) -> dict[str, Any]:
        """The JSON body of a chat request (optional fields only when set); ``mode`` overrides
        ``structured_output`` (the fallback after a refusal)."""
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
        fmt = response_format(params.json_schema, mode or self.spec.structured_output)
        if fmt is not None:
            body["response_format"] = fmt
        return body

    async def chat(self, messages: list[Message], params: SamplingParams, *, key: str | None = None) -> ChatResult:
        """Send one chat request (with retries); raises :class:`LLMError` when it fails for good.
        In batch mode it goes into the next batch (``key``: the request's cache key, its line's id).

        The result has ``params.n`` choices: greedy with ``n > 1`` (which vLLM's server rejects) asks
        for one choice and returns ``n`` copies; a server that returns fewer choices than asked (some
        ignore ``n``) is asked again for the rest (with ``seed + k`` when seeded), usage summed.
        """
        if self.batch is None:
            return await self.chat_online(messages, params)
        send = lambda m, p: self.batch.chat(m, p, key)  # noqa: E731
        return await self._with_choices(messages, params, send)

    async def chat_online(self, messages: list[Message], params: SamplingParams) -> ChatResult:
        """:meth:`chat` through ``/chat/completions`` whatever the mode (a batch item retried online)."""
        return await self._with_choices(messages, params, self._chat_once)

    async def _with_choices(self, messages: list[Message], params: SamplingParams, send: Any) -> ChatResult:
        """``params.n`` choices from ``send`` (see :meth:`chat`)."""
        if params.n > 1 and params.temperature == 0:
            result = await send(messages, dataclasses.replace(params, n=1))
            result.choices = result.choices[:1] * params.n
            return result
        result = await send(messages, params)
        round_ = 0
        while len(result.choices) < params.n:
            round_ += 1
            if ("n", self.spec.model) not in _warned:
                _warned.add(("n", self.spec.model))
                log.warning(
                    "%s returned %d of %d choices; asking again for the rest",
                    self.spec.model,
                    len(result.choices),
                    params.n,
                )
            seed = params.seed + round_ if params.seed is not None else None
            more = await send(messages, dataclasses.replace(params, n=params.n - len(result.choices), seed=seed))
            result.choices += more.choices
            result.usage.prompt_tokens += more.usage.prompt_tokens
            result.usage.completion_tokens += more.usage.completion_tokens
        result.choices = result.choices[: params.n]
        if params.n > 1 and len({c.text for c in result.choices}) == 1:
            self._note_copies(params)
        return result

    def _note_copies(self, params: SamplingParams) -> None:
        """``n`` sampled choices that are all the same text: counted, and warned about once."""
        self.identical_choices += 1
        if ("copies", self.spec.model) in _warned:
            return
        _warned.add(("copies", self.spec.model))
        log.warning(
            "%s returned %d identical choices at temperature %g: the server does not sample (n > 1 gains nothing; "
            "counted in identical_choices)",
            self.spec.model,
            params.n,
            params.temperature,
        )

    async def _chat_once(self, messages: list[Message], params: SamplingParams) -> ChatResult:
        """One request with its retries (see :meth:`chat`)."""
        await self._bind_loop()
        tried: set[str] = set()
        last_error = ""
        if self._semaphore is not None and self._semaphore.locked():
            self._warn_capped()
        async with self._semaphore or contextlib.nullcontext():
            # encode only once a slot is free: with thousands of calls queued, the work then overlaps the
            # network wait of the calls in flight instead of delaying the first of them
            bodies: dict[str, bytes] = {}
            estimate = estimate_tokens(messages, params) if self.limiter.tokens is not None else 0
            for attempt in range(self.spec.max_retries + 1):
                if self.limiter.active:  # tokens are reserved once per request (settled after success)
                    await self.limiter.acquire(estimate if attempt == 0 else 0)
                slot = await self.gate.acquire()
                try:
                    server = self.pool.acquire(exclude=tried)
                except PoolDown as exc:
                    await self.gate.release(slot)
                    raise LLMError(self._down_message(exc)) from None
                started = self.pool.now()
                try:
                    result, used = await self._send(server.url, messages, params, bodies)
                except _Retryable as exc:
                    cut = await self.gate.release(slot, timed_out=exc.unanswered == "timeout")
                    if cut:
                        self._warn_slow(server.url)
                    self.pool.release(
                        server,
                        ok=not exc.server_fault,
                        started=started,
                        unanswered=str(exc) if exc.unanswered else None,
                        neutral=exc.unanswered == "timeout" and not cut,  # one of a flood queued before the cut
                    )
                    if all(s.tripped for s in self.pool.servers):
                        self._down.set()
                    if exc.server_fault:
                        tried.add(server.url)
                    if len(tried) >= len(self.pool.servers):
                        tried.clear()
                    last_error = self._scrub(str(exc))
                    if exc.retry_after is not None and exc.retry_after > self.spec.max_retry_after_s:
                        raise LLMError(
                            f"openai backend ({self.spec.model}): {last_error}; the server asks to wait "
                            f"{exc.retry_after:.0f}s (Retry-After), more than max_retry_after_s="
                            f"{self.spec.max_retry_after_s:g}: try later, or raise max_retry_after_s"
                        ) from None
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
                    with contextlib.suppress(TimeoutError):  # woken early when the breaker takes every server out
                        await asyncio.wait_for(self._down.wait(), delay)
                    continue
                except BaseException:  # a final LLMError, or the caller cancelled us: free the slot, pass it on
                    self.pool.release(server, ok=True, started=started, neutral=True)
                    await asyncio.shield(self.gate.release(slot))
                    raise
                await self.gate.release(slot)
                self.pool.release(server, ok=True, started=started)
                self.limiter.settle(estimate, used)
                return result
        raise LLMError(
            f"openai backend ({self.spec.model}): gave up after {self.spec.max_retries + 1} attempts; "
            f"last error: {last_error}"
        )

    async def _send(
        self, url: str, messages: list[Message], params: SamplingParams, bodies: dict[str, bytes]
    ) -> tuple[ChatResult, int | None]:
        """One attempt on ``url``, stepping down the structured-output modes while the server refuses them."""
        first = mode = self.format_mode[url] if params.json_schema is not None else "none"
        while True:
            if mode not in bodies:
                bodies[mode] = orjson.dumps(self.payload(messages, params, mode))
            try:
                answer = await self._attempt(url, bodies[mode], has_format=mode != "none")
            except _FormatRefused as exc:
                mode = FALLBACK[mode]
                if MODES.index(mode) > MODES.index(self.format_mode[url]):  # concurrent calls may refuse together
                    self.format_mode[url] = mode
                if ("format", url) not in _warned:
                    _warned.add(("format", url))
                    log.warning(
                        "%s refused response_format (%s); sending %s instead (the reply is still validated)",
                        url,
                        self._scrub(str(exc)),
                        "response_format json_object" if mode == "json_object" else "the prompt alone",
                    )
                continue
            if mode != first:
                log.info("%s: structured output now %s", url, mode)
            return answer

    def _down_message(self, exc: PoolDown) -> str:
        return (
            f"openai backend ({self.spec.model}): stopped sending: {exc} ({self.where}.breaker_failures="
            f"{self.spec.breaker_failures}); the server is down or overloaded: check it (or lower the stage's "
            "concurrency, raise timeout_s), then rerun: finished calls replay from the cache"
        )

    def _warn_slow(self, url: str) -> None:
        """A timeout cut the requests in flight (:class:`AdaptiveLimit`); said once per server."""
        if ("slow", url) in _warned:
            return
        _warned.add(("slow", url))
        log.warning(
            "%s: no reply within %gs (timeout_s); sending at most %d requests at once from now on (grows back as "
            "replies come in time); a server that runs one request at a time needs a lower concurrency",
            url,
            self.spec.timeout_s,
            int(self.gate.limit or 1),
        )

    def _warn_capped(self) -> None:
        """Once per backend: its ``max_concurrency`` is making calls wait that the stage let through."""
        if ("capped", self.where) in _warned:
            return
        _warned.add(("capped", self.where))
        log.warning(
            "%s (%s): max_concurrency %d requests are in flight and more are waiting: the stage's concurrency "
            "is higher than this backend's limit; raise %s.max_concurrency, or leave it out (no limit of its own)",
            self.where,
            self.spec.model,
            self.spec.max_concurrency,
            self.where,
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Full-jitter exponential backoff; a server's ``Retry-After`` is a lower bound."""
        ceiling = min(self.spec.backoff_max_s, self.spec.backoff_base_s * (2**attempt))
        delay = random.uniform(0, ceiling)
        return max(delay, retry_after) if retry_after is not None else delay

    async def _attempt(self, url: str, body: bytes, *, has_format: bool = False) -> tuple[ChatResult, int | None]:
        """One POST to ``url``: the result and the tokens the server reported (None: no usage).

        Raises ``_Retryable`` for transient failures, ``_FormatRefused`` when the server rejects
        ``response_format``, ``LLMError`` for final failures.
        """
        session = self._session_for_loop()
        endpoint = url + "/chat/completions"
        try:
            async with session.post(endpoint, data=body, headers=self._headers) as response:
                raw = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except TimeoutError as exc:
            raise _Retryable(f"{url}: no reply within {self.spec.timeout_s}s", unanswered="timeout") from exc
        except aiohttp.ClientError as exc:
            why = f"{url}: connection failed ({type(exc).__name__}: {self._scrub(str(exc))})"
            raise _Retryable(why, unanswered="connection") from exc
        if status != 200:
            message = self._scrub(server_message(raw))
            codes = error_codes(raw)
            if status == 429 and codes & PERMANENT_429_CODES:
                raise LLMError(
                    f"openai backend ({self.spec.model}): {url} answered HTTP 429 "
                    f"({', '.join(sorted(codes & PERMANENT_429_CODES))}): {message}; this is a quota or billing "
                    "limit, not a rate limit: retrying does not help (add credit or raise the limit)"
                )
            if status in RETRYABLE_STATUS:
                raise _Retryable(
                    f"{url} answered HTTP {status}: {message}",
                    retry_after=parse_retry_after(retry_after),
                    server_fault=status >= 500,
                )
            if has_format and status in (400, 422) and FORMAT_REFUSAL.search(message):
                raise _FormatRefused(f"HTTP {status}: {message}")
            raise LLMError(f"openai backend ({self.spec.model}): {url} answered HTTP {status}: {message}")
        try:
            data = orjson.loads(raw)
            return parse_completion(data, self.spec.model), reported_tokens(data)
        except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as exc:
            snippet = self._scrub(raw[:200].decode("utf-8", "replace"))
            raise _Retryable(f"{url} sent a malformed reply ({exc}): {snippet!r}") from exc

    async def preflight(self, *, schema: bool = True) -> None:
        """Check every base URL at once before the run (see the module docstring): ``GET /models``, one
        one-token chat call with the configured name and, with ``schema`` (the run sends JSON schemas)
        unless ``structured_output`` is ``none``, one schema-constrained call. Raises
        :class:`LLMError` when no server can be reached, or a server refuses the API key, does not
        answer to ``model`` or answers outside the schema; an unreachable server of a larger pool is
        only warned about."""
        await self._bind_loop()
        session = self._session_for_loop()
        checks = (self._check(session, url, schema=schema) for url in self.spec.base_urls)
        failures = [problem for problem in await asyncio.gather(*checks) if problem is not None]
        if failures and len(failures) == len(self.spec.base_urls):
            raise LLMError(f"openai backend ({self.spec.model}): " + "; ".join(failures))
        for problem in failures:
            log.warning(
                "openai backend (%s): %s; the other servers of the pool take its requests", self.spec.model, problem
            )

    async def _check(self, session: aiohttp.ClientSession, url: str, *, schema: bool) -> str | None:
        """None when ``url`` is fit for the run; why not when it cannot be reached; raises otherwise."""
        problem, served = await self._probe(session, url)
        if problem is not None or self.batch is not None:  # batch mode sends nothing online
            return problem
        body = orjson.dumps(self.payload(PROBE_MESSAGES, SamplingParams(max_tokens=1), "none"))
        for again in (True, False):  # once more on a dropped connection (a keep-alive one the server closed)
            try:
                self.probes.append((await self._attempt(url, body))[0])
                break
            except _Retryable as exc:
                if not (again and exc.unanswered == "connection"):
                    return f"{self._scrub(str(exc))} (a one-token chat call)"
            except LLMError as exc:
                raise LLMError(f"{exc}; {self._name_fixes(served)}") from None
        if schema and self.spec.structured_output != "none":
            await self._check_schema(url)
        return None

    async def _check_schema(self, url: str) -> None:
        """One call with :data:`PROBE_SCHEMA`; raises :class:`LLMError` when the reply is outside it."""
        params = SamplingParams(max_tokens=16, json_schema=PROBE_SCHEMA)
        try:
            result, _ = await self._send(url, SCHEMA_MESSAGES, params, {})
        except _Retryable as exc:
            raise LLMError(f"openai backend ({self.spec.model}): the schema check failed: {exc}") from None
        self.probes.append(result)
        if _within_probe_schema(result.text, cut=result.finish_reason == "length"):
            return
        raise LLMError(
            f"openai backend ({self.spec.model}): {url} answered outside the JSON schema it was sent "
            f"(structured_output {self.format_mode[url]}; reply {result.text[:60]!r}): it ignores response_format, "
            "so the run's replies would not parse. Ways out: a server with guided decoding (vllm serve, SGLang, "
            f"llama.cpp's llama-server); {self.where}.structured_output: none (the schema in the prompt only, "
            "every reply still validated; small models then leave many unparseable); or the stage's output_mode: "
            "text (free-text prompts)"
        )

    def _name_fixes(self, served: list[str]) -> str:
        """What makes a server take the configured name, for the server at hand."""
        names = ", ".join(repr(m) for m in served[:5])
        listed = f"set {self.where}.model to a name it lists ({names}), or " if served else ""
        return (
            f"fixes: {listed}set {self.where}.model to exactly the name the server answers to: for vllm serve the "
            f"--served-model-name it was started with (else the model path), for transformers serve the path or "
            f"Hub id it was started with (`transformers serve <model>`); {self.where}.check_model: false skips the "
            "model-list check only, not this call"
        )

    async def _probe(self, session: aiohttp.ClientSession, url: str) -> tuple[str | None, list[str]]:
        """(None, the names ``url`` lists) when it answers; (why not, []) otherwise. A refused API key,
        or a model list without ``model``, raises at once."""
        timeout = aiohttp.ClientTimeout(
            total=self.spec.connect_timeout_s + 5.0, sock_connect=self.spec.connect_timeout_s
        )
        try:
            # a connection of its own: a server that fails this request may drop the connection after it
            # (uvicorn does after an error 500), and the chat check must not inherit a dead keep-alive one
            headers = self._headers | {"Connection": "close"}
            async with session.get(url + "/models", headers=headers, timeout=timeout) as response:
                raw = await response.read()
                status = response.status
        except TimeoutError:
            return f"cannot reach {url}: no answer within {self.spec.connect_timeout_s + 5.0:g}s", []
        except aiohttp.ClientError as exc:
            return f"cannot reach {url} ({type(exc).__name__}: {self._scrub(str(exc))}); is the server up?", []
        if status in (401, 403):
            key = f"the API key from {self.spec.api_key_env}" if self._api_key else "a request without an API key"
            raise LLMError(
                f"openai backend ({self.spec.model}): {url} refused {key} (HTTP {status}: "
                f"{self._scrub(server_message(raw))}); check the key, or set api_key_env"
            )
        if status != 200:
            if self.spec.check_model:
                log.warning(
                    "openai backend (%s): GET %s/models answered HTTP %d: model name not checked against its list "
                    "(the chat check below still is)",
                    self.spec.model,
                    url,
                    status,
                )
            return None, []
        served = served_models(raw)
        if self.spec.check_model and served and self.spec.model not in served:
            raise LLMError(
                f"openai backend: {url} does not serve model {self.spec.model!r} ({self.where}.model); it lists "
                f"{', '.join(repr(m) for m in served[:10])}. {self._name_fixes(served)}; for vllm serve, "
                f"--served-model-name {self.spec.model} serves it under that name"
            )
        return None, served

    async def close(self) -> None:
        """Close the HTTP session (idempotent); batch mode stops following its batches (the journal
        keeps them for the next run)."""
        if self.batch is not None:
            await self.batch.close()
        session, self._session = self._session, None
        await _close_session(session)


PROBE_MESSAGES: list[Message] = [{"role": "user", "content": "Say OK."}]
SCHEMA_MESSAGES: list[Message] = [{"role": "user", "content": "Reply with a JSON object."}]
PROBE_SCHEMA: dict[str, Any] = {
    "title": "preflight",
    "type": "object",
    "properties": {"preflight_7f3a": {"type": "boolean"}},
    "required": ["preflight_7f3a"],
    "additionalProperties": False,
}
"""The schema check's schema: a key no model writes unless the server enforces the schema."""


def _within_probe_schema(text: str, *, cut: bool) -> bool:
    """Whether ``text`` is an instance of :data:`PROBE_SCHEMA` (a reply cut by ``max_tokens``: its start)."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return cut and text.lstrip().startswith("{") and "preflight_7f3a" in text
    return isinstance(data, dict) and set(data) == {"preflight_7f3a"} and isinstance(data["preflight_7f3a"], bool)


def served_models(raw: bytes) -> list[str]:
    """The model ids of a ``GET /models`` reply (``{"data": [{"id": ...}]}``); [] when it holds none."""
    try:
        data = orjson.loads(raw).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        return []
    if not isinstance(data, list):
        return []
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


async def _close_session(session: aiohttp.ClientSession | None) -> None:
    """Close ``session`` if open; one whose event loop has gone closes without touching that loop."""
    if session is None or session.closed:
        return
    try:
        await session.close()
    except Exception as exc:  # a session of a loop that is gone: nothing left to release
        log.debug("closing an old HTTP session failed: %s", exc)
