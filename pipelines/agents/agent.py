"""The agent pattern: a prompt template plus a parser from reply text to a typed result.

Render, call and parse are separate steps, each testable alone::

    planner = Agent("planner", Path(__file__).parent, parse_plan, max_attempts=2)
    messages = planner.render(language="en", definition=k)      # exact prompt
    plan = planner.parse(reply_text)                            # typed result or ParseError
    record = await planner.run(llm, {"definition": k}, sample_index=0)

``run`` renders, calls the LLM inside the run's concurrency slot, parses, and re-asks a reply
that does not parse (with the next sample index, so the request cache keeps both) up to
``max_attempts`` times. It never raises for a bad reply or a failed call: it returns an
:class:`AgentRecord` with ``ok=False`` and the error, which becomes a trace row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pipelines.agents.templates import PromptTemplate
from pipelines.llm.types import LLMError, Message, SamplingParams

T = TypeVar("T")


class ParseError(ValueError):
    """A reply that does not have the expected form; the message says what was missing."""


def to_jsonable(value: Any) -> Any:
    """Dataclasses, pydantic models, tuples and sets turned into plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    return value


@dataclass
class AgentRecord(Generic[T]):
    """What one agent did for one sample: prompt, final reply, parsed result, usage, errors.

    ``calls`` counts LLM requests (retries included); ``usage`` sums their tokens; ``replies``
    keeps every raw reply when there was more than one attempt.
    """

    agent: str
    role: str
    prompt: list[Message]
    reply: str | None = None
    parsed: T | None = None
    ok: bool = False
    error: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    cached: bool = False
    calls: int = 0
    replies: list[str] = field(default_factory=list)
    latency_s: float = 0.0

    def to_trace(self, sample_id: str, **extra: Any) -> dict[str, Any]:
        """The trace row (shared format: sample_id, agent, role, prompt, reply, parsed, ok, ...)."""
        row = {
            "sample_id": sample_id,
            "agent": self.agent,
            "role": self.role,
            "prompt": self.prompt,
            "reply": self.reply,
            "parsed": to_jsonable(self.parsed),
            "ok": self.ok,
            "error": self.error,
            "usage": dict(self.usage),
            "cached": self.cached,
            "calls": self.calls,
        }
        if len(self.replies) > 1:
            row["replies"] = list(self.replies)
        row.update({k: to_jsonable(v) for k, v in extra.items()})
        return row


class Agent(Generic[T]):
    """A named prompt template (``<folder>/<name>.<lang>.j2``) and a parser ``str -> T``.

    ``role`` selects the LLM in :meth:`LLMRuntime.for_role` (defaults to ``name``);
    ``max_tokens`` overrides the role's default length; ``retry_temperature`` is used for
    re-asks when the first call was greedy, so a retry can give a different reply.
    """

    def __init__(
        self,
        name: str,
        folder: Path | str,
        parser: Callable[[str], T],
        *,
        role: str | None = None,
        max_attempts: int = 2,
        max_tokens: int | None = None,
        retry_temperature: float | None = None,
        default_language: str = "en",
    ):
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.name = name
        self.role = role or name
        self.template = PromptTemplate(folder, name)
        self.parser = parser
        self.max_attempts = max_attempts
        self.max_tokens = max_tokens
        self.retry_temperature = retry_temperature
        self.default_language = default_language

    def render(self, language: str | None = None, **vars: Any) -> list[Message]:
        """The exact chat messages for ``vars`` in ``language`` (en, zh, ...)."""
        return self.template.render(language or self.default_language, **vars)

    def parse(self, text: str | None) -> T:
        """Parsed result of a reply; raises :class:`ParseError` for an empty or malformed one."""
        if text is None or not text.strip():
            raise ParseError("empty reply")
        return self.parser(text)

    def _params(self, base: SamplingParams, attempt: int) -> SamplingParams:
        changes: dict[str, Any] = {}
        if self.max_tokens is not None:
            changes["max_tokens"] = self.max_tokens
        if attempt > 0 and self.retry_temperature is not None and base.temperature == 0:
            changes["temperature"] = self.retry_temperature
        return dataclasses.replace(base, **changes) if changes else base

    async def run(self, llm: Any, vars: dict[str, Any], sample_index: int = 0) -> AgentRecord[T]:
        """Render, call (within the run's concurrency slot), parse, retry a bad reply; never raises
        for a bad reply or an :class:`LLMError` (see ``ok`` and ``error`` of the record)."""
        vars = dict(vars)
        language = vars.pop("language", None)
        messages = self.render(language, **vars)
        record: AgentRecord[T] = AgentRecord(agent=self.name, role=self.role, prompt=messages, cached=True)
        for attempt in range(self.max_attempts):
            params = self._params(llm.default_params, attempt)
            try:
                result = await llm.chat(messages, params, sample_index=sample_index + attempt)
            except LLMError as exc:
                record.calls += 1
                record.cached = False
                record.error = f"llm: {exc}"
                return record
            record.calls += 1
            record.cached = record.cached and result.cached
            record.latency_s += result.latency_s
            record.usage["prompt_tokens"] += result.usage.prompt_tokens
            record.usage["completion_tokens"] += result.usage.completion_tokens
            record.reply = result.text
            record.replies.append(result.text)
            try:
                record.parsed = self.parse(result.text)
            except (ParseError, ValueError) as exc:  # ValueError: e.g. json's limit on huge integers
                record.error = f"parse (attempt {attempt + 1}/{self.max_attempts}): {exc}"
                continue
            record.ok, record.error = True, None
            return record
        return record
