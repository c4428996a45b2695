"""vLLM's in-process async engine on GPUs: continuous batching, tensor parallel, LoRA per request.

``VLLMBackend(spec)`` (spec: :class:`VLLMBackendConfig`) starts vLLM's ``AsyncLLM`` engine for
``spec.model`` with ``tensor_parallel_size`` GPUs. vLLM is imported here only, when the backend is
built; without it the constructor raises :class:`LLMError` saying ``pip install -e ".[gpu]"``.

Each chat is rendered with the model's own chat template (the transformers tokenizer, exactly as
the transformers backend renders it), sent as token ids, and answered with vLLM sampling:
greedy at ``temperature == 0``, ``n`` choices, stop strings (cut from the text), ``seed`` (through
:class:`LLM` the request's own, :mod:`pipelines.llm.seeding`), and
structured output when ``json_schema`` is set. Greedy with ``n > 1`` (which vLLM rejects) asks
for one choice and returns ``n`` copies of it, as the transformers backend does; usage counts the
tokens generated once. A request the engine ends with finish reason ``error`` or ``abort`` raises
:class:`LLMError` (so it is never cached), and a schema the engine cannot compile raises
``LLMError("json_schema cannot be compiled: ...")``. Concurrent ``chat`` calls are batched by vLLM's
scheduler (continuous batching), so callers just keep many requests in flight. The engine serves
one event loop: the one running when the backend was built, else the one of its first request;
a call from any other loop raises :class:`LLMError` instead of hanging. An engine that cannot
start (CUDA out of memory, settings vLLM rejects) raises :class:`LLMError` saying what to change.

LoRA: ``spec.adapter`` is applied to every request; ``backend.with_adapter(path)`` returns a view
sharing the same engine that applies another adapter (and has its own cache ``identity``), e.g. to
evaluate several fine-tunes of one base model without reloading it. The engine starts with LoRA
only when ``spec.lora_enabled`` (an adapter is set, or ``enable_lora: true``); ``with_adapter`` on
an engine without LoRA raises :class:`LLMError`. ``max_loras`` adapters share a batch, and
``max_cpu_loras`` stay cached in CPU memory. Each adapter folder gets a LoRA name unique to its
resolved path (:func:`lora_name`; vLLM tells adapters apart by name) and a stable integer id. A
request with an adapter whose folder ships a tokenizer (training saves one with the chat template
it trained on) is rendered with that tokenizer's chat template and also stops at its EOS token,
as the transformers backend does; otherwise the base model's tokenizer renders it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import json
import logging
import re
from pathlib import Path
from typing import Any

from pipelines.llm.config import VLLMBackendConfig
from pipelines.llm.transformers_backend import chat_prompt_ids
from pipelines.llm.types import ChatResult, Choice, LLMError, Message, SamplingParams, Usage
from pipelines.models.fingerprint import folder_fingerprint

log = logging.getLogger(__name__)

INSTALL_HINT = 'vLLM is not installed; on a GPU machine run: pip install -e ".[gpu]"'

FAILED_FINISH_REASONS = frozenset({"error", "abort"})
"""Finish reasons of requests the engine did not complete: raised, never returned or cached."""

_SCHEMA_TROUBLE = re.compile(r"schema|grammar|structured output|guided", re.I)
_MEMORY_SIGNS = ("out of memory", "kv cache", "cache blocks", "not enough memory", "insufficient memory")


def import_vllm() -> Any:
    """The ``vllm`` module, or :class:`LLMError` telling how to install it."""
    try:
        import vllm
    except ImportError as exc:
        raise LLMError(f"{INSTALL_HINT} (import failed: {exc})") from exc
    return vllm


def vllm_identity(spec: VLLMBackendConfig, adapter: str | None) -> str:
    """``vllm:<model>[+<adapter>]@<hash>``: the request-cache key of model, adapter and dtype."""
    digest = hashlib.sha256(json.dumps({"dtype": spec.dtype, "remote": spec.trust_remote_code}).encode())
    for location in (spec.model, adapter):
        if location:
            folder = Path(location)
            digest.update(folder_fingerprint(folder).encode() if folder.is_dir() else location.encode())
    return f"vllm:{spec.model}{f'+{adapter}' if adapter else ''}@{digest.hexdigest()[:12]}"


def lora_name(adapter: str) -> str:
    """vLLM LoRA name of an adapter folder: its last two path parts and a hash of its resolved path.

    vLLM compares LoRA requests by name, so ``models/sft/final`` and ``models/dpo/final`` must not
    both be ``final``: they become e.g. ``sft-final-1a2b3c4d`` and ``dpo-final-5e6f7a8b``.
    """
    resolved = Path(adapter).resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    tail = "-".join(part for part in resolved.parts[-2:] if part != resolved.anchor)
    return f"{tail}-{digest}" if tail else f"adapter-{digest}"


def engine_args(spec: VLLMBackendConfig, vllm: Any) -> Any:
    """vLLM ``AsyncEngineArgs`` for a spec (LoRA settings only when ``spec.lora_enabled``)."""
    lora: dict[str, Any] = {}
    if spec.lora_enabled:
        lora = {
            "max_lora_rank": spec.max_lora_rank,
            "max_loras": spec.max_loras,
            "max_cpu_loras": spec.max_cpu_loras,
        }
    return vllm.AsyncEngineArgs(
        model=spec.model,
        tensor_parallel_size=spec.tensor_parallel_size,
        gpu_memory_utilization=spec.gpu_memory_utilization,
        max_model_len=spec.max_model_len,
        dtype=spec.dtype,
        trust_remote_code=spec.trust_remote_code,
        enable_lora=spec.lora_enabled,
        disable_log_stats=True,
        **lora,
    )


def load_chat_tokenizer(source: str, *, trust_remote_code: bool, what: str) -> Any:
    """The transformers tokenizer in ``source``, with a chat template, or :class:`LLMError` saying the fix."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise LLMError(
            f"cannot load the tokenizer of {source} ({type(exc).__name__}: {exc}); `{what}` must be a "
            "local model folder (download it once on a machine with network access)"
        ) from exc
    if not tokenizer.chat_template:
        raise LLMError(f"tokenizer of {source} has no chat template; use an instruct model")
    return tokenizer


def ships_tokenizer(adapter: str) -> bool:
    """Whether an adapter folder carries its own tokenizer (and so maybe its own chat template)."""
    return (Path(adapter) / "tokenizer_config.json").is_file()


def start_engine(spec: VLLMBackendConfig, vllm: Any) -> Any:
    """Start vLLM's in-process async engine (v1 ``AsyncLLM``; older releases: ``AsyncLLMEngine``)."""
    try:
        from vllm.v1.engine.async_llm import AsyncLLM as Engine
    except ImportError:
        Engine = vllm.AsyncLLMEngine
    return Engine.from_engine_args(engine_args(spec, vllm))


def start_error(spec: VLLMBackendConfig, exc: BaseException) -> str:
    """The :class:`LLMError` message for an engine that failed to start: what failed and what to change."""
    what = f"{type(exc).__name__}: {exc}".strip()
    text = what.lower()
    if any(sign in text for sign in _MEMORY_SIGNS):
        fix = (
            f"lower gpu_memory_utilization (now {spec.gpu_memory_utilization}) or max_model_len "
            f"(now {spec.max_model_len}), raise tensor_parallel_size, or free the GPU (see nvidia-smi)"
        )
    elif isinstance(exc, (ValueError, TypeError)) or "validation" in text:
        fix = "vLLM rejected these engine settings; change the one it names in the llm block of params.yaml"
    else:
        fix = "see the vLLM message above; check the model folder and the GPU"
    return f"vLLM engine for {spec.model} failed to start ({what[:800]}); {fix}"


class VLLMBackend:
    """:class:`Backend` on vLLM's async engine; see the module docstring."""

    def __init__(self, spec: VLLMBackendConfig, *, adapter: str | None = None, _shared: VLLMBackend | None = None):
        self.spec = spec
        self.adapter = adapter if adapter is not None else spec.adapter
        if self.adapter and not Path(self.adapter).is_dir():
            raise LLMError(f"adapter folder {self.adapter} does not exist; train it first or fix `adapter`")
        self.identity = vllm_identity(spec, self.adapter)
        self.requests = 0
        if _shared is not None:
            self._core = _shared._core
            self._core.register(self.adapter)
            return
        vllm = import_vllm()
        tokenizer = load_chat_tokenizer(spec.model, trust_remote_code=spec.trust_remote_code, what="model")
        core = _EngineCore(vllm, None, tokenizer, spec)
        core.register(self.adapter)  # a bad adapter tokenizer fails before the engine takes the GPU
        try:
            core.engine = start_engine(spec, vllm)
        except Exception as exc:
            raise LLMError(start_error(spec, exc)) from exc
        self._core = core
        try:  # built inside a running loop: that loop is the one the engine serves
            self._core.loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        log.info(
            "vLLM engine up for %s (tensor parallel %d, LoRA %s)",
            spec.model,
            spec.tensor_parallel_size,
            f"on, {spec.max_loras} side by side" if spec.lora_enabled else "off",
        )

    def with_adapter(self, adapter: str | None) -> VLLMBackend:
        """A backend sharing this engine that applies ``adapter`` (None: the base model) to its requests.

        Raises :class:`LLMError` when ``adapter`` is set but the engine was started without LoRA.
        """
        if adapter and not self.spec.lora_enabled:
            raise LLMError(
                f"the vLLM engine for {self.spec.model} was started without LoRA, so adapter {adapter} cannot "
                "be applied; set `enable_lora: true` in its llm block of params.yaml"
            )
        return VLLMBackend(self.spec, adapter=adapter or "", _shared=self)

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResult:
        """Answer ``messages``; the engine batches this request with every other one in flight."""
        self.requests += 1
        return await self._core.chat(messages, params, self.adapter or None, self.identity)

    async def close(self) -> None:
        """Shut the engine down (all views sharing it stop working)."""
        self._core.shutdown()


class _EngineCore:
    """The engine, tokenizers and LoRA registry shared by a backend and its adapter views.

    ``lora_ids`` maps each adapter's :func:`lora_name` to its integer id (1, 2, ... in order of
    first use); ``tokenizers`` maps a LoRA name to the adapter's own tokenizer, when it ships one.
    """

    def __init__(self, vllm: Any, engine: Any, tokenizer: Any, spec: VLLMBackendConfig):
        self.vllm = vllm
        self.engine = engine
        self.tokenizer = tokenizer
        self.spec = spec
        self.lora_ids: dict[str, int] = {}
        self.tokenizers: dict[str, Any] = {}
        self.request_ids = itertools.count()
        self.loop: asyncio.AbstractEventLoop | None = None

    def register(self, adapter: str | None) -> None:
        """Give ``adapter`` its LoRA id and load its own tokenizer (once); nothing for the base model."""
        if not adapter:
            return
        name = lora_name(adapter)
        if name in self.lora_ids:
            return
        if ships_tokenizer(adapter):
            self.tokenizers[name] = load_chat_tokenizer(
                adapter, trust_remote_code=self.spec.trust_remote_code, what="adapter"
            )
        self.lora_ids[name] = len(self.lora_ids) + 1

    def tokenizer_for(self, adapter: str | None) -> Any:
        """The tokenizer that renders requests with ``adapter``: its own if it ships one, else the base one."""
        return self.tokenizers.get(lora_name(adapter), self.tokenizer) if adapter else self.tokenizer

    def lora_request(self, adapter: str | None) -> Any:
        """vLLM ``LoRARequest`` of a registered adapter (unique name, stable id), or None for the base model."""
        if not adapter:
            return None
        from vllm.lora.request import LoRARequest

        name = lora_name(adapter)
        return LoRARequest(lora_name=name, lora_int_id=self.lora_ids[name], lora_path=str(Path(adapter).resolve()))

    def stop_token_ids(self, adapter: str | None) -> list[int] | None:
        """The adapter tokenizer's EOS id where it differs from the base one (its template ends turns there)."""
        own = self.tokenizer_for(adapter)
        if own is self.tokenizer or own.eos_token_id is None or own.eos_token_id == self.tokenizer.eos_token_id:
            return None
        return [own.eos_token_id]

    def sampling_params(self, params: SamplingParams, *, stop_token_ids: list[int] | None = None) -> Any:
        from vllm.sampling_params import RequestOutputKind

        extra: dict[str, Any] = {}
        if stop_token_ids:
            extra["stop_token_ids"] = stop_token_ids
        if params.json_schema is not None:
            try:
                from vllm.sampling_params import StructuredOutputsParams

                extra["structured_outputs"] = StructuredOutputsParams(json=params.json_schema)
            except ImportError:  # vLLM < 0.11 named it guided decoding
                from vllm.sampling_params import GuidedDecodingParams

                extra["guided_decoding"] = GuidedDecodingParams(json=params.json_schema)
        return self.vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            stop=list(params.stop) or None,
            seed=params.seed,
            output_kind=RequestOutputKind.FINAL_ONLY,
            **extra,
        )

    async def chat(self, messages: list[Message], params: SamplingParams, adapter: str | None, model: str):
        loop = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = loop
        elif self.loop is not loop:
            raise LLMError(
                "the vLLM engine serves the event loop it was built in (or of its first request); "
                "make every call in that one loop"
            )
        prompt_ids = chat_prompt_ids(self.tokenizer_for(adapter), messages, model)
        request_id = f"edumas-{next(self.request_ids)}"
        copies = params.n if params.n > 1 and params.temperature == 0 else 1  # greedy: one choice, n copies
        final = None
        try:
            async for output in self.engine.generate(
                {"prompt_token_ids": list(prompt_ids)},
                self.sampling_params(
                    dataclasses.replace(params, n=1) if copies > 1 else params,
                    stop_token_ids=self.stop_token_ids(adapter),
                ),
                request_id,
                lora_request=self.lora_request(adapter),
            ):
                final = output
        except Exception as exc:
            if params.json_schema is not None and _SCHEMA_TROUBLE.search(str(exc)):
                raise LLMError(f"json_schema cannot be compiled: {type(exc).__name__}: {exc}") from exc
            raise LLMError(f"vLLM request {request_id} failed: {type(exc).__name__}: {exc}") from exc
        if final is None or not final.outputs:
            raise LLMError(f"vLLM request {request_id} returned no output")
        outputs = sorted(final.outputs, key=lambda o: o.index)
        failed = sorted({str(o.finish_reason) for o in outputs if o.finish_reason in FAILED_FINISH_REASONS})
        if failed:
            raise LLMError(f"vLLM request {request_id} ended with finish reason {', '.join(failed)} (not completed)")
        usage = Usage(
            prompt_tokens=len(final.prompt_token_ids or prompt_ids),
            completion_tokens=sum(len(o.token_ids) for o in outputs),
        )
        choices = [Choice(text=o.text, finish_reason=o.finish_reason or "stop") for o in outputs] * copies
        return ChatResult(choices=choices, usage=usage, model=model)

    def shutdown(self) -> None:
        shutdown = getattr(self.engine, "shutdown", None)
        if shutdown is not None:
            shutdown()
