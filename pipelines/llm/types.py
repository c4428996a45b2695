"""The data every backend speaks: chat messages, sampling parameters, results and errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one request.

    ``json_schema`` asks for structured output (OpenAI ``response_format`` / vLLM guided decoding);
    ``n`` asks for several choices of the same prompt in one call. Empty stop strings are dropped
    (vLLM rejects them, and they would stop nothing anyway), so every backend sees the same list.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1
    json_schema: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1 or self.n < 1:
            raise ValueError("max_tokens and n must be >= 1")
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        object.__setattr__(self, "stop", tuple(s for s in stop if s))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (stop as a list), stable for hashing and logging."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
            "seed": self.seed,
            "n": self.n,
            "json_schema": self.json_schema,
        }


@dataclass
class Usage:
    """Token counts of one call (all choices together)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Choice:
    """One generated answer and why generation stopped (``stop``, ``length``, ...)."""

    text: str
    finish_reason: str = "stop"


@dataclass
class ChatResult:
    """What a chat call returns: the choices, token usage and whether it came from the cache."""

    choices: list[Choice]
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    cached: bool = False
    latency_s: float = 0.0
    retried_errors: list[str] = field(default_factory=list)  # errors of earlier tries the backend retried

    @property
    def text(self) -> str:
        """Text of the first choice (the common case, ``n == 1``)."""
        return self.choices[0].text if self.choices else ""

    @property
    def finish_reason(self) -> str:
        return self.choices[0].finish_reason if self.choices else "error"

    def to_dict(self) -> dict[str, Any]:
        return {
            "choices": [{"text": c.text, "finish_reason": c.finish_reason} for c in self.choices],
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens},
            "model": self.model,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatResult:
        return cls(
            choices=[Choice(**c) for c in data["choices"]],
            usage=Usage(**data.get("usage", {})),
            model=data.get("model", ""),
        )


class LLMError(RuntimeError):
    """A call that failed for good (after retries); the message says which server and why."""


@runtime_checkable
class Backend(Protocol):
    """What every backend implements. ``identity`` names the model for the request cache.

    A backend may also define ``async def preflight() -> None`` (raise :class:`LLMError` when its
    endpoint cannot serve); :meth:`LLMRuntime.preflight` calls it once per backend.
    """

    identity: str

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResult: ...

    async def close(self) -> None: ...
