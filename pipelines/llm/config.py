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

    temperature: float = Field(0.0, ge=0.0, le=2.0, description="sampling temperature (0: greedy)")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    max_tokens: int = Field(256, ge=1, description="reply length cap per call")
    stop: list[str] = Field([], description="stop strings")
    seed: int | None = Field(None, description="sampling seed (used when temperature > 0)")
    n: int = Field(1, ge=1, description="choices per call")

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

    sampling: SamplingConfig | None = Field(
        None,
        description="in a role's entry: sampling keys overriding llm.sampling for that role (only the keys given); "
        "not allowed on llm.default",
    )


class BatchModeConfig(StrictModel):
    """``batch``: how ``mode: batch`` uses a provider's batch API (OpenAI's files + batches protocol;
    docs/batch.md). A wave of calls goes out as one batch when every call in progress waits on a
    batch (checked every ``settle_s``, twice in a row), or at ``max_wait_s`` after its first call."""

    endpoint: str = Field(
        "/v1/chat/completions", description="the `url` of each input line and the batch's endpoint (GLM: /v4/...)"
    )
    completion_window: str = Field("24h", description="completion window asked of the provider for each batch")
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

    kind: Literal["openai"] = Field(
        description="openai: any OpenAI-compatible chat server (vLLM serve, transformers serve, OpenAI, GLM, ...)",
    )
    model: str = Field(
        description="model name the server serves (vllm serve --served-model-name); checked against its /models "
        "list (check_model)",
    )
    base_urls: list[str] = Field(
        min_length=1,
        description="server URLs ending in /v1 (http:// or https://); several form one least-loaded pool",
    )
    api_key_env: EnvVarName | None = Field(
        "OPENAI_API_KEY",
        description="name of the environment variable holding the API key (a pasted key is refused, not echoed); "
        "null: no key sent",
    )
    max_concurrency: int | None = Field(
        None,
        ge=1,
        description="requests in flight to this backend at most (None: no limit of its own; the stage's "
        "concurrency governs). A limit that makes calls wait is warned about once",
    )
    timeout_s: float = Field(120.0, gt=0, description="seconds a request may take before it is retried")
    connect_timeout_s: float = Field(10.0, gt=0, description="seconds to open a connection")
    max_retries: int = Field(
        6, ge=0,
        description="retries of a failed request (timeouts, 429, 5xx) before the call fails",
    )
    backoff_base_s: float = Field(0.5, gt=0, description="first wait between retries (doubled each retry, with jitter)")
    backoff_max_s: float = Field(60.0, gt=0, description="longest wait between retries")
    max_retry_after_s: float = Field(
        120.0, gt=0, description="longest Retry-After honoured; a server asking for more fails the call at once"
    )
    requests_per_minute: int | None = Field(None, ge=1, description="client-side rate limit of requests (null: none)")
    tokens_per_minute: int | None = Field(
        None, ge=1,
        description="client-side rate limit of prompt + completion tokens (null: none)",
    )
    structured_output: Literal["json_schema", "json_object", "none"] = Field(
        "json_schema",
        description="how an agent's JSON schema is sent: json_schema (response_format with the schema) | "
        "json_object (JSON mode, schema in the prompt only) | none",
    )
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
    mode: Literal["online", "batch"] = Field(
        "online",
        description="online: one request per call | batch: through the provider's batch API at half price (see "
        "batch; docs/batch.md)",
    )
    batch: BatchModeConfig = Field(
        BatchModeConfig(),
        description="how mode: batch waves are formed, submitted and polled",
    )

    @field_validator("base_urls")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"base url {url!r} must start with http:// or https://")
        return [u.rstrip("/") for u in urls]


class TransformersBackendConfig(_RoleSampling):
    """A local model loaded with transformers; concurrent requests share one ``generate`` call."""

    kind: Literal["transformers"] = Field(
        description="transformers: a local model folder loaded in this process (the offline default)",
    )
    model: str = Field(description="local model folder (e.g. models/base/smollm2-135m-instruct); nothing is downloaded")
    adapter: str | None = Field(
        None,
        description="PEFT adapter folder merged into the model at load (e.g. models/sft/final); null: none",
    )
    device: str = Field("cpu", description="torch device: cpu | cuda | cuda:0 ...")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "float32",
        description="dtype the model is loaded in",
    )
    max_batch_size: int = Field(
        16, ge=1,
        description="rows of one generate call at most (concurrent requests are batched; n > 1 counts n rows)",
    )
    batch_wait_ms: float = Field(10.0, ge=0, description="milliseconds a batch waits for more requests before it runs")
    trust_remote_code: bool = Field(False, description="run the model folder's own Python code (MiniCPM, ChatGLM3)")
    threads: int | None = Field(
        None,
        ge=1,
        description="torch CPU threads of a generate alone; local models generating at once in one process "
        "share them (None: torch's default)",
    )
    split_batch_tokens: int | None = Field(
        1024,
        ge=0,
        description="a batch is split into generate calls of similar prompt length when each extra call "
        "saves more than this many padded prompt tokens (None: one generate per batch)",
    )
    scheduling: Literal["batch", "continuous"] = Field(
        "batch",
        description="batch: one generate per batch, every row waits for its longest; continuous: a row leaves "
        "when it ends and a waiting request joins at the next step (models with a plain cache; else batch)",
    )


VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The LoRA ranks vLLM's engine accepts for ``max_lora_rank``."""


class VLLMBackendConfig(_RoleSampling):
    """vLLM's in-process async engine on GPUs, with optional per-request LoRA adapters.

    LoRA is switched on only when it is used: ``adapter`` is set, or ``enable_lora: true`` for
    adapters added later with ``with_adapter``. ``max_loras`` adapters run in one batch side by
    side; ``max_cpu_loras`` (None: vLLM uses ``max_loras``) are kept loaded in CPU memory.
    """

    kind: Literal["vllm"] = Field(description="vllm: vLLM's in-process engine on GPUs")
    model: str = Field(description="local model folder")
    adapter: str | None = Field(None, description="LoRA adapter folder applied per request (turns LoRA on); null: none")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs the model is split over")
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1,
        description="share of each GPU's memory vLLM may take (weights + KV cache)",
    )
    max_model_len: int | None = Field(
        None, ge=1,
        description="longest prompt + reply in tokens (null: the model's own)",
    )
    enable_lora: bool | None = Field(None, description="None: LoRA on exactly when `adapter` is set")
    max_lora_rank: int = Field(
        64, ge=1,
        description="largest LoRA rank served; one of 1, 8, 16, 32, 64, 128, 256, 320, 512 (the next one up from "
        "your rank)",
    )
    max_loras: int = Field(2, ge=1, strict=True, description="adapters served side by side in one batch")
    max_cpu_loras: int | None = Field(None, ge=1, strict=True, description="adapters cached in CPU (>= max_loras)")
    dtype: str = Field("auto", description="dtype vLLM loads the model in (auto: the model's own)")
    trust_remote_code: bool = Field(False, description="run the model folder's own Python code (MiniCPM, ChatGLM3)")

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

    kind: Literal["scripted"] = Field(description="scripted: tests only, replies read from a file")
    model: str = Field("scripted", description="name recorded in traces and usage")
    replies: str = Field(description="JSONL file of recorded replies or rules")


BackendConfig = Annotated[
    Union[OpenAIBackendConfig, TransformersBackendConfig, VLLMBackendConfig, ScriptedBackendConfig],
    Field(discriminator="kind"),
]


class RoleSamplingConfig(StrictModel):
    """A role entry without ``kind``: the default backend with this role's own ``sampling``."""

    sampling: SamplingConfig = Field(description="this role's sampling keys over llm.sampling, on the default backend")


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

    default: BackendConfig = Field(
        description="backend every role runs on unless roles names another (inherited from the top-level llm when "
        "left out)",
    )
    roles: dict[str, RoleConfig] = Field(
        {},
        description="role -> its own backend spec (with optional sampling) or {sampling: ...} on the default "
        "backend; only the section's own roles (another name is an error)",
    )
    cache: str | None = Field(
        "data/cache/llm.sqlite",
        description="request cache file (SQLite): a rerun repeats no finished call; null: off (inherited from the "
        "top-level llm when left out)",
    )
    sampling: SamplingConfig = Field(
        SamplingConfig(),
        description="sampling of every role unless its roles entry overrides keys",
    )

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
