"""The one chat interface every agent uses.

``LLMRuntime`` builds the backends named in an :class:`LLMConfig` (one per distinct spec, shared
by the roles that name it), owns the request cache and the usage accounting, and hands out an
:class:`LLM` per agent role::

    runtime = LLMRuntime(config)
    planner = runtime.for_role("planner")
    result = await planner.chat(messages, sample_index=3)
    print(result.text, result.usage.completion_tokens)
    runtime.accounting.write("reports/tagging/usage.json")
    await runtime.close()
"""

from __future__ import annotations

import time
from typing import Any

from pipelines.llm.accounting import Accounting
from pipelines.llm.cache import RequestCache, request_key
from pipelines.llm.config import LLMConfig
from pipelines.llm.types import Backend, ChatResult, LLMError, Message, SamplingParams


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
    ):
        self.backend = backend
        self.role = role
        self.cache = cache
        self.accounting = accounting if accounting is not None else Accounting()
        self.default_params = default_params or SamplingParams()

    @property
    def identity(self) -> str:
        return self.backend.identity

    async def chat(
        self, messages: list[Message], params: SamplingParams | None = None, *, sample_index: int = 0
    ) -> ChatResult:
        """Answer ``messages``; a finished identical request is replayed from the cache.

        ``sample_index`` separates otherwise identical requests that must stay distinct (the
        i-th sample of a temperature > 0 run). Raises :class:`LLMError` when the backend fails.
        """
        params = params or self.default_params
        key = request_key(self.backend.identity, messages, params, sample_index) if self.cache is not None else None
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.accounting.record(
                    self.role,
                    prompt_tokens=hit.usage.prompt_tokens,
                    completion_tokens=hit.usage.completion_tokens,
                    cached=True,
                    latency_s=0.0,
                )
                return hit
        start = time.perf_counter()
        try:
            result = await self.backend.chat(messages, params)
        except LLMError:
            self.accounting.record_error(self.role)
            raise
        except Exception as exc:  # any backend failure (e.g. a torch error in a batch) becomes an LLMError
            self.accounting.record_error(self.role)
            raise LLMError(f"{self.backend.identity}: {type(exc).__name__}: {exc}") from exc
        result.latency_s = time.perf_counter() - start
        if not result.model:
            result.model = self.backend.identity
        if key is not None:
            self.cache.put(key, result)
        self.accounting.record(
            self.role,
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
            cached=False,
            latency_s=result.latency_s,
        )
        return result


def build_backend(spec: Any) -> Backend:
    """Instantiate the backend for one spec; heavy libraries are imported only when chosen."""
    kind = spec.kind
    if kind == "openai":
        from pipelines.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(spec)
    if kind == "transformers":
        from pipelines.llm.transformers_backend import TransformersBackend

        return TransformersBackend(spec)
    if kind == "vllm":
        from pipelines.llm.vllm_backend import VLLMBackend

        return VLLMBackend(spec)
    if kind == "scripted":
        from pipelines.llm.scripted import ScriptedBackend

        return ScriptedBackend.from_file(spec.replies, identity=spec.model)
    raise LLMError(f"unknown backend kind {kind!r}; use openai, vllm, transformers or scripted")


class LLMRuntime:
    """Backends, cache and accounting of one stage run; ``for_role`` gives each agent its LLM."""

    def __init__(self, config: LLMConfig, *, backends: dict[str, Backend] | None = None):
        self.config = config
        self.cache = RequestCache(config.cache) if config.cache else None
        self.accounting = Accounting()
        self._backends: dict[str, Backend] = dict(backends or {})

    def spec_for(self, role: str) -> Any:
        return self.config.roles.get(role, self.config.default)

    def backend_for(self, role: str) -> Backend:
        spec = self.spec_for(role)
        key = spec.model_dump_json()
        if key not in self._backends:
            self._backends[key] = build_backend(spec)
        return self._backends[key]

    def for_role(self, role: str, params: SamplingParams | None = None) -> LLM:
        """The :class:`LLM` for ``role`` (its own backend if params name one, else the default)."""
        return LLM(
            self.backend_for(role),
            role=role,
            cache=self.cache,
            accounting=self.accounting,
            default_params=params or self.config.sampling.to_params(),
        )

    async def close(self) -> None:
        for backend in self._backends.values():
            await backend.close()
        if self.cache is not None:
            self.cache.close()
