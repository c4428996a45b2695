"""Typed params for the LLM runtime: one backend spec per kind, per-role overrides, the cache.

In ``params.yaml`` a stage's ``llm`` block looks like::

    llm:
      default: {kind: transformers, model: models/base/smollm2-135m-instruct}
      roles:
        numerical_judge: {kind: openai, model: glm-4, base_urls: [https://open.bigmodel.cn/api/paas/v4],
                          sampling: {temperature: 0.7}}     # own backend and sampling
        solver: {sampling: {max_tokens: 512}}                # the default backend, own sampling
      sampling: {temperature: 0.0, max_tokens: 256}          # every role, unless its entry overrides keys
      cache: data/cache/llm.sqlite

A role's ``sampling`` overrides only the keys it names; the rest come from ``llm.sampling``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from pipelines.llm.types import SamplingParams
from pipelines.redaction import EnvVarName
from pipelines.strict import StrictModel, did_you_mean


class SamplingConfig(StrictModel):
    """Default sampling parameters for an agent role (see :class:`SamplingParams`)."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(256, ge=1)
    stop: list[str] = []
    seed: int | None = None
    n: int = Field(1, ge=1)

    def to_params(self, **overrides) -> SamplingParams:
        data = self.model_dump() | overrides
        data["stop"] = tuple(data["stop"])
        return SamplingParams(**data)

    def overlaid(self, role_sampling: SamplingConfig | None) -> SamplingConfig:
        """This config with the keys ``role_sampling`` sets explicitly put over it."""
        if role_sampling is None:
            return self
        return SamplingConfig.model_validate(self.model_dump() | role_sampling.model_dump(exclude_unset=True))


class _RoleSampling(StrictModel):
    """``sampling``: per-role overrides of ``llm.sampling`` (only the keys given are changed)."""

    sampling: SamplingConfig | None = None


class BatchModeConfig(StrictModel):
    """``batch``: how ``mode: batch`` uses a provider's batch API (OpenAI's files + batches protocol;
    docs/batch.md). A wave of calls goes out as one batch when every call in progress waits on a
    batch (checked every ``settle_s``, twice in a row), or at ``max_wait_s`` after its first call."""

    endpoint: str = Field(
        "/v1/chat/completions", description="the `url` of each input line and the batch's endpoint (GLM: /v4/...)"
    )
    completion_window: str = "24h"
    poll_interval_s: float = Field(60.0, gt=0, description="seconds between GET /batches/{id} while waiting")
    settle_s: float = Field(0.05, gt=0, description="how often the collector checks whether the wave is complete")
    max_wait_s: float = Field(
        600.0, gt=0, description="a wave is submitted at the latest this long after its first call"
    )
    max_requests: int = Field(50_000, ge=1, description="requests per batch at most (OpenAI: 50,000)")
    max_file_bytes: int = Field(200_000_000, ge=1024, description="input file size per batch at most (OpenAI: 200 MB)")
    on_item_failure: Literal["batch", "online", "fail"] = Field(
        "batch",
        description="expired or retryable failed items: into the next batch, sent online, or failed at once",
    )
    max_item_retries: int = Field(2, ge=0, description="times an item is retried before its call fails")
    journal: str | None = Field(
        None,
        description="where batch ids and their request keys are recorded (resume after a kill); None: beside "
        "llm.cache (<cache>.batches.sqlite); with llm.cache null and no journal a killed run submits again",
    )


class OpenAIBackendConfig(_RoleSampling):
    """Any OpenAI-compatible server; several ``base_urls`` form one least-loaded pool. ``mode: batch``
    sends the calls through the server's batch API instead (``batch`` says how; docs/batch.md)."""

    kind: Literal["openai"]
    model: str
    base_urls: list[str] = Field(min_length=1)
    api_key_env: EnvVarName | None = "OPENAI_API_KEY"  # a pasted key is refused, not echoed
    max_concurrency: int | None = Field(
        None,
        ge=1,
        description="requests in flight to this backend at most (None: no limit of its own; the stage's "
        "concurrency governs). A limit that makes calls wait is warned about once",
    )
    timeout_s: float = Field(120.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(6, ge=0)
    backoff_base_s: float = Field(0.5, gt=0)
    backoff_max_s: float = Field(60.0, gt=0)
    max_retry_after_s: float = Field(
        120.0, gt=0, description="longest Retry-After honoured; a server asking for more fails the call at once"
    )
    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: int | None = Field(None, ge=1)
    structured_output: Literal["json_schema", "json_object", "none"] = "json_schema"
    check_model: bool = Field(
        True,
        description="at start, stop unless the server's /models list holds `model` (a server that lists no "
        "models, or answers no list, is not checked); false for servers whose list leaves out names they serve",
    )
    breaker_failures: int = Field(
        8,
        ge=1,
        description="attempts in a row on one server that get no answer (refused or dropped connections, "
        "timeouts) before it is taken out of the run; with every server out the stage's calls fail at once",
    )
    mode: Literal["online", "batch"] = "online"
    batch: BatchModeConfig = BatchModeConfig()

    @field_validator("base_urls")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"base url {url!r} must start with http:// or https://")
        return [u.rstrip("/") for u in urls]


class TransformersBackendConfig(_RoleSampling):
    """A local model loaded with transformers; concurrent requests share one ``generate`` call."""

    kind: Literal["transformers"]
    model: str
    adapter: str | None = None
    device: str = "cpu"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    max_batch_size: int = Field(16, ge=1)
    batch_wait_ms: float = Field(10.0, ge=0)
    trust_remote_code: bool = False
    threads: int | None = Field(None, ge=1, description="torch CPU threads (None: torch's default)")
    split_batch_tokens: int | None = Field(
        1024,
        ge=0,
        description="a batch is split into generate calls of similar prompt length when each extra call "
        "saves more than this many padded prompt tokens (None: one generate per batch)",
    )


VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The LoRA ranks vLLM's engine accepts for ``max_lora_rank``."""


class VLLMBackendConfig(_RoleSampling):
    """vLLM's in-process async engine on GPUs, with optional per-request LoRA adapters.

    LoRA is switched on only when it is used: ``adapter`` is set, or ``enable_lora: true`` for
    adapters added later with ``with_adapter``. ``max_loras`` adapters run in one batch side by
    side; ``max_cpu_loras`` (None: vLLM uses ``max_loras``) are kept loaded in CPU memory.
    """

    kind: Literal["vllm"]
    model: str
    adapter: str | None = None
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    enable_lora: bool | None = Field(None, description="None: LoRA on exactly when `adapter` is set")
    max_lora_rank: int = Field(64, ge=1)
    max_loras: int = Field(2, ge=1, strict=True, description="adapters served side by side in one batch")
    max_cpu_loras: int | None = Field(None, ge=1, strict=True, description="adapters cached in CPU (>= max_loras)")
    dtype: str = "auto"
    trust_remote_code: bool = False

    @property
    def lora_enabled(self) -> bool:
        """Whether the engine starts with LoRA: ``enable_lora`` if given, else whether ``adapter`` is set."""
        return self.enable_lora if self.enable_lora is not None else bool(self.adapter)

    @model_validator(mode="after")
    def _lora_settings(self) -> VLLMBackendConfig:
        if self.enable_lora is False and self.adapter:
            raise ValueError(f"adapter {self.adapter} needs LoRA; remove `enable_lora: false` or the adapter")
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(
                f"max_cpu_loras ({self.max_cpu_loras}) must be at least max_loras ({self.max_loras}); "
                "raise max_cpu_loras or leave it out"
            )
        return self

    @field_validator("max_lora_rank")
    @classmethod
    def _lora_rank(cls, rank: int) -> int:
        if rank not in VLLM_LORA_RANKS:
            allowed = ", ".join(map(str, VLLM_LORA_RANKS))
            raise ValueError(f"vLLM accepts max_lora_rank {allowed}; got {rank} (use the next one up from your rank)")
        return rank


class ScriptedBackendConfig(_RoleSampling):
    """Tests only: replies from a JSONL file of recorded replies or rules."""

    kind: Literal["scripted"]
    model: str = "scripted"
    replies: str


BackendConfig = Annotated[
    Union[OpenAIBackendConfig, TransformersBackendConfig, VLLMBackendConfig, ScriptedBackendConfig],
    Field(discriminator="kind"),
]


class RoleSamplingConfig(StrictModel):
    """A role entry without ``kind``: the default backend with this role's own ``sampling``."""

    sampling: SamplingConfig


def _role_entry_kind(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("kind", "sampling-only")
    return getattr(value, "kind", "sampling-only")


RoleConfig = Annotated[
    Union[
        Annotated[OpenAIBackendConfig, Tag("openai")],
        Annotated[TransformersBackendConfig, Tag("transformers")],
        Annotated[VLLMBackendConfig, Tag("vllm")],
        Annotated[ScriptedBackendConfig, Tag("scripted")],
        Annotated[RoleSamplingConfig, Tag("sampling-only")],
    ],
    Discriminator(_role_entry_kind),
]
"""One ``llm.roles`` entry: a backend spec (with optional ``sampling``) or just ``{sampling: ...}``."""


class LLMConfig(StrictModel):
    """The ``llm`` block of a stage: default backend, per-role backends and sampling, cache file."""

    default: BackendConfig
    roles: dict[str, RoleConfig] = {}
    cache: str | None = "data/cache/llm.sqlite"
    sampling: SamplingConfig = SamplingConfig()

    @model_validator(mode="after")
    def _no_default_sampling(self) -> LLMConfig:
        if self.default.sampling is not None:
            raise ValueError("llm.default.sampling is not used; put the run's sampling under llm.sampling")
        return self

    def spec_for(self, role: str) -> Any:
        """The backend spec ``role`` runs on (its own, or ``default``)."""
        entry = self.roles.get(role)
        return entry if entry is not None and not isinstance(entry, RoleSamplingConfig) else self.default

    def sampling_for(self, role: str) -> SamplingParams:
        """``llm.sampling`` overlaid by the keys ``llm.roles.<role>.sampling`` sets."""
        entry = self.roles.get(role)
        return self.sampling.overlaid(entry.sampling if entry is not None else None).to_params()

    def check_roles(self, valid: Iterable[str]) -> None:
        """Raise ``ValueError`` naming the first entry of ``llm.roles`` that is not in ``valid``."""
        valid = list(dict.fromkeys(valid))
        for role in self.roles:
            if role not in valid:
                hint = did_you_mean(role, valid)
                raise ValueError(f"unknown role {role!r} in llm.roles{hint}; valid roles: {', '.join(valid)}")
