"""The one chat interface every agent uses.

``LLMRuntime`` builds the backends named in an :class:`LLMConfig` (one per distinct spec, shared
by the roles that name it), owns the request cache and the usage accounting, and hands out an
:class:`LLM` per agent role (with that role's sampling)::

    runtime = LLMRuntime(config)
    await runtime.preflight()                      # fails in seconds when an endpoint is unreachable
    planner = runtime.for_role("planner")
    result = await planner.chat(messages, sample_index=3, attempt=0, tag="expert0/round1")
    print(result.text, result.usage.completion_tokens)
    runtime.accounting.write("reports/tagging/usage.json")
    await runtime.close()

A call first looks in the request cache (a hit holds no concurrency slot), then among the calls in
flight (the very same request sent by another system at the same time waits for that one's reply,
counted as a cache hit, instead of being sent twice); on a miss it takes one
slot of the run's limit (:mod:`pipelines.llm.limits`) around the backend call only, and while
calls are in flight the young generation of the garbage collector is collected less often
(:class:`pipelines.llm.in_progress._YoungGenerationWhileBusy`).

Re-asks that cannot help are skipped (:class:`ReaskWatch`, for backends with ``watch_reasks``: the
servers; a local or scripted backend samples as it is told): once a backend has answered
``ReaskWatch.after`` re-asks (``attempt > 0``) of a request with byte-identical text and never with
other text (a greedy-only server), a later re-ask returns the earlier reply without a call, counted
in ``skipped`` and warned about once.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import time
from collections import OrderedDict
from typing import Any

import orjson

from pipelines.llm import limits
from pipelines.llm.accounting import Accounting
from pipelines.llm.cache import RequestCache, request_key
from pipelines.llm.config import LLMConfig
from pipelines.llm.in_progress import _busy
from pipelines.llm.openai_backend import OpenAIBackend
from pipelines.llm.scripted import ScriptedBackend
from pipelines.llm.seeding import per_request
from pipelines.llm.transformers_backend import TransformersBackend
from pipelines.llm.types import Backend, ChatResult, LLMError, Message, SamplingParams
from pipelines.llm.vllm_backend import VLLMBackend
from pipelines.llm.waves import parked

log = logging.getLogger(__name__)


class ReaskWatch:
    """Notices a backend whose re-asks return the very text of the call before (see the module
    docstring); keeps the last reply of up to ``size`` requests (by backend, messages, sample, tag)."""

    after = 3

    def __init__(self, size: int = 4096):
        self.size = size
        self.last: OrderedDict[str, ChatResult] = OrderedDict()
        self.same: dict[str, int] = {}
        self.different: dict[str, int] = {}
        self.skipped: dict[str, int] = {}

    @staticmethod
    def key(identity: str, messages: list[Message], sample_index: int, tag: str) -> str:
        return hashlib.blake2b(orjson.dumps([identity, messages, sample_index, tag]), digest_size=16).hexdigest()

    def useless(self, identity: str) -> bool:
        return self.same.get(identity, 0) >= self.after and not self.different.get(identity, 0)

    def skip(self, identity: str, key: str, attempt: int) -> ChatResult | None:
        """The earlier reply when this re-ask cannot help, else None."""
        earlier = self.last.get(key) if attempt > 0 and self.useless(identity) else None
        if earlier is None:
            return None
        self.skipped[identity] = self.skipped.get(identity, 0) + 1
        if self.skipped[identity] == 1:
            log.warning(
                "%s returned byte-identical text for %d re-asks of the same request: it does not sample; re-asks "
                "are skipped from now on (the earlier reply is parsed again); a server that samples, or "
                "output_mode/structured_output that parse, fix the cause",
                identity,
                self.same[identity],
            )
        copy = ChatResult.from_dict(earlier.to_dict())
        copy.cached, copy.latency_s = True, 0.0
        return copy

    def note(self, identity: str, key: str, attempt: int, result: ChatResult) -> None:
        earlier = self.last.get(key)
        if attempt > 0 and earlier is not None:
            counts = self.same if earlier.text == result.text else self.different
            counts[identity] = counts.get(identity, 0) + 1
        self.last[key] = result
        self.last.move_to_end(key)
        while len(self.last) > self.size:
            self.last.popitem(last=False)


def _current_slot() -> tuple[Any, int]:
    """The run's call limiter and priority (:func:`pipelines.llm.limits.current`)."""
    return limits.current()


def cacheable(result: ChatResult) -> bool:
    """False for replies that must not be replayed forever: empty ones and content-filtered ones."""
    if any(choice.finish_reason == "content_filter" for choice in result.choices):
        return False
    return any(choice.text.strip() for choice in result.choices)


class LLM:
    """A backend bound to one role, with the cache and the accounting in front of it."""

    def __init__(
        self,
        backend: Backend,
        *,
        role: str = "default",
        cache: RequestCache | None = None,
        accounting: Accounting | None = None,
        default_params: SamplingParams | None = None,
        reasks: ReaskWatch | None = None,
    ):
        self.backend = backend
        self.reasks = reasks if reasks is not None else ReaskWatch()
        self.role = role
        self.cache = cache
        self.accounting = accounting if accounting is not None else Accounting()
        self.default_params = default_params or SamplingParams()

    @property
    def identity(self) -> str:
        return self.backend.identity

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams | None = None,
        *,
        sample_index: int = 0,
        attempt: int = 0,
        tag: str = "",
    ) -> ChatResult:
        """Answer ``messages``; a finished identical request is replayed from the cache.

        ``sample_index``, ``attempt`` and ``tag`` separate otherwise identical requests that must
        stay distinct (the i-th sample, a retry, expert 0 vs expert 1 or round t vs t+1 at
        temperature > 0); all three are part of the cache key. Empty and content-filtered replies
        are returned but not cached. Raises :class:`LLMError` when the backend fails.
        """
        params = params or self.default_params
        if not getattr(self.backend, "watch_reasks", False):
            return await self._busy_chat(messages, params, sample_index, attempt, tag)
        identity = self.backend.identity
        watch = self.reasks.key(identity, messages, sample_index, tag)
        skipped = self.reasks.skip(identity, watch, attempt)
        if skipped is not None:
            return skipped
        result = await self._busy_chat(messages, params, sample_index, attempt, tag)
        self.reasks.note(identity, watch, attempt, result)
        return result

    async def _busy_chat(
        self, messages: list[Message], params: SamplingParams, sample_index: int, attempt: int, tag: str
    ) -> ChatResult:
        _busy.enter()
        try:
            return await self._chat(messages, params, sample_index, attempt, tag)
        finally:
            _busy.leave()

    async def _chat(
        self, messages: list[Message], params: SamplingParams, sample_index: int, attempt: int, tag: str
    ) -> ChatResult:
        key = None
        if self.cache is not None or params.seed is not None or getattr(self.backend, "wants_request_key", False):
            key = request_key(self.backend.identity, messages, params, sample_index, attempt=attempt, tag=tag)
        if self.cache is not None:
            hit = await self.cache.aget(key)
            if hit is None:
                hit = await self._same_call_in_flight(key)
            if hit is not None:
                self.accounting.record(
                    self.role,
                    prompt_tokens=hit.usage.prompt_tokens,
                    completion_tokens=hit.usage.completion_tokens,
                    cached=True,
                    latency_s=0.0,
                )
                return hit
            done: asyncio.Future = asyncio.get_running_loop().create_future()
            self.cache.in_flight[key] = done
        try:
            result = await self._call(messages, per_request(params, key), key)  # the seed of this request
        except BaseException:
            if self.cache is not None:
                self._settle(key, None)
            raise
        keep = cacheable(result)
        if self.cache is not None:
            try:
                if keep:
                    await self.cache.aput(key, result)
            finally:
                self._settle(key, result if keep else None)
        self.accounting.record(
            self.role,
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
            cached=False,
            latency_s=result.latency_s,
            uncacheable=not keep,
        )
        return result

    async def _same_call_in_flight(self, key: str) -> ChatResult | None:
        """The reply of an identical call already in flight (another system or role sending the very
        same request at the same time), as a cache hit; None when there is none, or it failed or
        was not cacheable (then this call is sent itself, as it would be one after the other)."""
        pending = self.cache.in_flight.get(key) if self.cache is not None else None
        if pending is None or pending.get_loop() is not asyncio.get_running_loop():
            return None
        with parked():  # waits on another call: a batch mode's wave need not wait for this one
            result = await asyncio.shield(pending)
        if result is None:
            return None
        copy = ChatResult.from_dict(result.to_dict())
        copy.cached = True
        return copy

    def _settle(self, key: str, result: ChatResult | None) -> None:
        pending = self.cache.in_flight.pop(key, None) if self.cache is not None else None
        if pending is not None and not pending.done():
            pending.set_result(result)

    async def _call(self, messages: list[Message], params: SamplingParams, key: str | None = None) -> ChatResult:
        """The backend call in one slot of the run's limit; any failure becomes a counted LLMError.
        A backend with ``wants_request_key`` (batch mode) is given the request's key."""
        limiter, priority = _current_slot()
        try:
            if limiter is not None:
                await limiter.acquire(priority)
            try:
                start = time.perf_counter()
                if key is not None and getattr(self.backend, "wants_request_key", False):
                    result = await self.backend.chat(messages, params, key=key)
                else:
                    result = await self.backend.chat(messages, params)
                latency_s = time.perf_counter() - start
            finally:
                if limiter is not None:
                    limiter.release()
        except LLMError:
            self.accounting.record_error(self.role)
            raise
        except Exception as exc:  # any backend failure (e.g. a torch error in a batch) becomes an LLMError
            self.accounting.record_error(self.role)
            raise LLMError(f"{self.backend.identity}: {type(exc).__name__}: {exc}") from exc
        result.latency_s = latency_s
        if not result.model:
            result.model = self.backend.identity
        return result


def build_backend(spec: Any, *, where: str = "llm.default", cache_path: str | None = None) -> Backend:
    """Instantiate the backend for one spec (``where`` names it in params for error messages;
    ``cache_path``, the run's ``llm.cache``, places a batch mode's journal beside it); a backend
    imports its heavy libraries (torch, vLLM) only when built."""
    kind = spec.kind
    if kind == "openai":
        return OpenAIBackend(spec, where=where, cache_path=cache_path)
    if kind == "transformers":
        return TransformersBackend(spec)
    if kind == "vllm":
        return VLLMBackend(spec)
    if kind == "scripted":
        return ScriptedBackend.from_file(spec.replies, identity=spec.model)
    raise LLMError(f"unknown backend kind {kind!r}; use openai, vllm, transformers or scripted")


def backend_key(spec: Any) -> str:
    """The key under which :class:`LLMRuntime` keeps the backend of ``spec`` (its ``sampling`` aside),
    also the key of a prebuilt backend passed in ``LLMRuntime(config, backends={key: backend})``."""
    return spec.model_dump_json(exclude={"sampling"})


class LLMRuntime:
    """Backends, cache and accounting of one stage run; ``for_role`` gives each agent its LLM.

    ``backends`` maps :func:`backend_key` of a spec to an already built backend to use for it.
    """

    def __init__(self, config: LLMConfig, *, backends: dict[str, Backend] | None = None):
        self.config = config
        self.cache = RequestCache(config.cache) if config.cache else None
        self.accounting = Accounting()
        self.reasks = ReaskWatch()
        self._backends: dict[str, Backend] = dict(backends or {})

    def spec_for(self, role: str) -> Any:
        return self.config.spec_for(role)

    def backend_for(self, role: str) -> Backend:
        """The backend of ``role``; roles with equal specs (sampling aside) share one."""
        spec = self.spec_for(role)
        key = backend_key(spec)
        if key not in self._backends:
            where = f"llm.roles.{role}" if spec is not self.config.default else "llm.default"
            self._backends[key] = build_backend(spec, where=where, cache_path=self.config.cache)
        return self._backends[key]

    def for_role(self, role: str, params: SamplingParams | None = None) -> LLM:
        """The :class:`LLM` for ``role``: its own backend if params name one, else the default; its
        ``default_params`` are ``llm.sampling`` overlaid by ``llm.roles.<role>.sampling`` (or ``params``)."""
        return LLM(
            self.backend_for(role),
            role=role,
            cache=self.cache,
            accounting=self.accounting,
            default_params=params or self.config.sampling_for(role),
            reasks=self.reasks,
        )

    async def preflight(self, *, schema: bool = True) -> None:
        """Build every configured backend and check each distinct endpoint once (concurrently).

        OpenAI-compatible servers get a few tiny requests each (the model list, a one-token chat call,
        with ``schema`` a schema-constrained call: pass False for a run that sends no JSON schemas,
        ``output_mode: text``); an unreachable one raises :class:`LLMError` naming its URL within
        seconds, a server that refuses the name or ignores the schema raises too; local backends have
        nothing to check.
        """
        backends: dict[int, Backend] = {}
        for role in ["default", *self.config.roles]:
            backend = self.backend_for(role)
            backends[id(backend)] = backend
        checks = [
            check(schema=schema) if "schema" in inspect.signature(check).parameters else check()
            for b in backends.values()
            if (check := getattr(b, "preflight", None)) is not None
        ]
        try:
            await asyncio.gather(*checks)
        finally:  # the checks' chat calls are counted (usage.json holds every token sent), role "preflight"
            for backend in backends.values():
                probes = getattr(backend, "probes", None) or []
                for probe in probes:
                    self.accounting.record(
                        "preflight",
                        prompt_tokens=probe.usage.prompt_tokens,
                        completion_tokens=probe.usage.completion_tokens,
                        cached=False,
                        latency_s=0.0,
                    )
                probes.clear()

    async def close(self) -> None:
        for backend in self._backends.values():
            await backend.close()
        if self.cache is not None:
            self.cache.close()
