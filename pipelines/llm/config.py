"""Typed params for the LLM runtime: one backend spec per kind, per-role overrides, the cache.

In ``params.yaml`` a stage's ``llm`` block looks like::

    llm:
      default: {kind: transformers, model: models/base/smollm2-135m-instruct}
      roles:
        numerical_judge: {kind: openai, model: glm-4, base_urls: [https://open.bigmodel.cn/api/paas/v4]}
      cache: data/cache/llm.sqlite
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator

from pipelines.config import StrictModel
from pipelines.llm.types import SamplingParams


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


class OpenAIBackendConfig(StrictModel):
    """Any OpenAI-compatible server; several ``base_urls`` form one least-loaded pool."""

    kind: Literal["openai"]
    model: str
    base_urls: list[str] = Field(min_length=1)
    api_key_env: str | None = "OPENAI_API_KEY"
    max_concurrency: int = Field(64, ge=1)
    timeout_s: float = Field(120.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(6, ge=0)
    backoff_base_s: float = Field(0.5, gt=0)
    backoff_max_s: float = Field(60.0, gt=0)
    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: int | None = Field(None, ge=1)
    structured_output: Literal["json_schema", "json_object", "none"] = "json_schema"

    @field_validator("base_urls")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"base url {url!r} must start with http:// or https://")
        return [u.rstrip("/") for u in urls]


class TransformersBackendConfig(StrictModel):
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


class VLLMBackendConfig(StrictModel):
    """vLLM's in-process async engine on GPUs, with optional per-request LoRA adapters."""

    kind: Literal["vllm"]
    model: str
    adapter: str | None = None
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    max_lora_rank: int = Field(64, ge=1)
    dtype: str = "auto"
    trust_remote_code: bool = False


class ScriptedBackendConfig(StrictModel):
    """Tests only: replies from a JSONL file of recorded replies or rules."""

    kind: Literal["scripted"]
    model: str = "scripted"
    replies: str


BackendConfig = Annotated[
    Union[OpenAIBackendConfig, TransformersBackendConfig, VLLMBackendConfig, ScriptedBackendConfig],
    Field(discriminator="kind"),
]


class LLMConfig(StrictModel):
    """The ``llm`` block of a stage: default backend, per-role overrides, cache file."""

    default: BackendConfig
    roles: dict[str, BackendConfig] = {}
    cache: str | None = "data/cache/llm.sqlite"
    sampling: SamplingConfig = SamplingConfig()
