"""The agent pattern: a prompt template plus a parser from reply text to a typed result.

Render, call and parse are separate steps, each testable alone::

    planner = Agent("planner", Path(__file__).parent, parse_plan, output=PlanOutput, max_tokens=128)
    messages = planner.render("en", definition=k)                       # exact prompt (text mode)
    plan = planner.parse(reply_text)                                    # typed result or ParseError
    record = await planner.run(llm, {"definition": k}, sample_index=0, tag="plan", mode="json")

Two output modes, chosen per team in params:

- ``text``: the paper's prompt; ``parser(reply) -> T`` reads the free-text reply.
- ``json``: the template is rendered with ``output_mode="json"`` and ``output_schema`` (the pretty
  JSON schema of the ``output`` pydantic model), the schema goes to the backend in
  ``SamplingParams.json_schema`` (constrained decoding where the backend has it), and the reply is
  validated by the model; ``from_output`` (or ``model.to_result()``) maps it to the same typed
  result as the text parser.

``run`` renders, calls ``llm.chat`` with the sample index, the attempt number and the call tag
(the request-cache key holds all three), parses every choice, and re-asks a reply that does not
parse up to ``max_attempts`` times. It never raises for a bad reply or a failed call: it returns an
:class:`AgentRecord` with ``ok=False`` and the error, which becomes a trace row. The one exception
is a schema the backend cannot compile: :class:`AgentSchemaError` naming the agent.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from pipelines.agents.parsing import ParseError, json_object, truncated_json_objects
from pipelines.agents.templates import PromptTemplate
from pipelines.llm.types import LLMError, Message, SamplingParams

T = TypeVar("T")
OutputMode = Literal["text", "json"]
OUTPUT_MODES = ("text", "json")
SAMPLING_FIELDS = ("temperature", "top_p", "max_tokens", "stop", "seed", "n")


class AgentSchemaError(LLMError):
    """An agent's output schema cannot be used (not JSON-schema-able, or the backend cannot compile it)."""


_PLAIN = frozenset({str, int, float, bool})


def to_jsonable(value: Any) -> Any:
    """Dataclasses, pydantic models, tuples and sets turned into plain JSON values."""
    if value is None or type(value) in _PLAIN:  # most values of a trace row: nothing to convert
        return value
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
    keeps every raw reply when there was more than one; ``unparseable`` counts replies that did
    not parse; ``choices`` holds every choice of the last call (``{"text", "parsed", "error"}``)
    when ``n > 1``; ``error_kind`` is ``"llm"`` (the call failed), ``"parse"`` or None;
    ``retried_errors``: what earlier tries of its calls that the backend retried failed with (batch
    mode's expired or failed lines), in the trace row only when there were any.
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
    choices: list[dict[str, Any]] = field(default_factory=list)
    unparseable: int = 0
    error_kind: str | None = None
    mode: str = "text"
    tag: str = ""
    retried_errors: list[str] = field(default_factory=list)

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
            "mode": self.mode,
            "unparseable": self.unparseable,
            "error_kind": self.error_kind,
        }
        if self.tag:
            row["tag"] = self.tag
        if len(self.replies) > 1:
            row["replies"] = list(self.replies)
        if self.retried_errors:
            row["retried_errors"] = list(self.retried_errors)
        if len(self.choices) > 1:
            row["choices"] = [{**c, "parsed": to_jsonable(c["parsed"])} for c in self.choices]
        row.update({k: to_jsonable(v) for k, v in extra.items()})
        return row


class Agent(Generic[T]):
    """A named prompt template (``<folder>/<name>.<lang>.j2``), a parser ``str -> T`` and sampling.

    ``role`` selects the LLM in :meth:`LLMRuntime.for_role` (defaults to ``name``). ``output`` (a
    pydantic model class) declares the typed result for ``json`` mode; ``from_output(model)`` (else
    ``model.to_result()`` when defined, else the model itself) maps a validated reply to ``T``.
    ``temperature``, ``top_p``, ``max_tokens``, ``stop``, ``seed`` and ``n`` override the role's
    sampling (``llm.sampling`` overlaid by ``llm.roles.<role>.sampling``) for this agent; None keeps
    the role's value.
    ``retry_temperature`` is used for re-asks when the first call was greedy.
    ``call_schema(vars)`` (json mode): the JSON schema of one call from its template variables, a
    narrowing of the declared one (e.g. spans limited to the call's own sentence); None keeps the
    declared schema. The reply is still validated by ``output``.
    """

    def __init__(
        self,
        name: str,
        folder: Path | str,
        parser: Callable[[str], T],
        *,
        role: str | None = None,
        output: type[BaseModel] | None = None,
        from_output: Callable[[Any], T] | None = None,
        max_attempts: int = 2,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        n: int | None = None,
        retry_temperature: float | None = None,
        default_language: str = "en",
        repair_truncated: bool = True,
        call_schema: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    ):
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.name = name
        self.role = role or name
        self.template = PromptTemplate(folder, name)
        self.parser = parser
        self.output = output
        self.from_output = from_output
        self.repair_truncated = repair_truncated
        self.max_attempts = max_attempts
        self.sampling = {
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "stop": tuple(stop) if stop is not None else None,
            "seed": seed,
            "n": n,
        }
        self.retry_temperature = retry_temperature
        self.default_language = default_language
        self.call_schema = call_schema
        self.json_schema: dict[str, Any] | None = None
        if output is not None:
            try:
                self.json_schema = output.model_json_schema()
                json.dumps(self.json_schema)
            except Exception as exc:  # pydantic cannot express a field type as JSON schema
                why = f"agent {name!r}: output model {output.__name__} has no JSON schema: {exc}"
                raise AgentSchemaError(why) from exc

    @property
    def max_tokens(self) -> int | None:
        return self.sampling["max_tokens"]

    def output_schema_text(self) -> str:
        """The pretty JSON schema shown to the model in json mode ("" without an output model);
        serialised once per schema object (an agent given a new ``json_schema`` renders it anew)."""
        schema = self.json_schema
        cached = getattr(self, "_schema_text", None)
        if cached is None or cached[0] is not schema:
            cached = self._schema_text = (schema, json.dumps(schema, ensure_ascii=False, indent=2) if schema else "")
        return cached[1]

    def render(self, language: str | None = None, *, output_mode: OutputMode = "text", **vars: Any) -> list[Message]:
        """The exact chat messages for ``vars`` in ``language`` (en, zh, ...) and output mode."""
        self._check_mode(output_mode)
        schema = self.output_schema_text() if output_mode == "json" else ""
        return self.template.render(
            language or self.default_language, output_mode=output_mode, output_schema=schema, **vars
        )

    def parse(
        self,
        text: str | None,
        mode: OutputMode = "text",
        *,
        truncated: bool = False,
        output: type[BaseModel] | None = None,
    ) -> T:
        """Parsed result of a reply; raises :class:`ParseError` for an empty or malformed one.

        ``output`` (json mode): validate with this model instead of the declared one (see ``run``).

        ``truncated`` (json mode): the reply was cut by ``max_tokens``; the JSON prefix is closed
        and what it holds is validated (a schema whose required fields came first still parses),
        unless the agent was built with ``repair_truncated=False`` (a cut-off value such as code
        must never pass as a whole one).
        """
        if text is None or not text.strip():
            raise ParseError("empty reply")
        if mode == "text":
            return self.parser(text)
        self._check_mode(mode)
        try:
            candidates = [json_object(text)]
        except ParseError:
            if not truncated or not self.repair_truncated:
                raise
            candidates = list(truncated_json_objects(text))
            if not candidates:
                raise
        model = output or self.output
        value, first_error = None, None
        for data in candidates:
            try:
                value = model.model_validate(data)
                break
            except ValidationError as exc:
                first_error = first_error or exc
        if value is None:
            first = first_error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "reply"
            raise ParseError(f"reply does not match {model.__name__}: {where}: {first['msg']}")
        if self.from_output is not None:
            return self.from_output(value)
        to_result = getattr(value, "to_result", None)
        return to_result() if callable(to_result) else value

    def _check_mode(self, mode: str) -> None:
        if mode not in OUTPUT_MODES:
            raise ValueError(f"agent {self.name!r}: output mode {mode!r}; use one of {', '.join(OUTPUT_MODES)}")
        if mode == "json" and self.output is None:
            raise ValueError(f"agent {self.name!r} declares no output model, so it cannot run in json mode")

    def params(
        self, base: SamplingParams, attempt: int = 0, mode: OutputMode = "text", *, json_schema: dict | None = None
    ) -> SamplingParams:
        """``base`` overlaid by this agent's sampling, the retry temperature and the json schema
        (``json_schema``, else the declared one)."""
        changes = {k: v for k, v in self.sampling.items() if v is not None}
        temperature = changes.get("temperature", base.temperature)
        if attempt > 0 and self.retry_temperature is not None and temperature == 0:
            changes["temperature"] = self.retry_temperature
        if mode == "json":
            changes["json_schema"] = json_schema or self.json_schema
        return dataclasses.replace(base, **changes) if changes else base

    async def run(
        self,
        llm: Any,
        vars: dict[str, Any],
        sample_index: int = 0,
        *,
        tag: str = "",
        mode: OutputMode = "text",
        output: type[BaseModel] | None = None,
    ) -> AgentRecord[T]:
        """Render, call, parse every choice, retry a bad reply; never raises for a bad reply or an
        :class:`LLMError` (see ``ok`` and ``error`` of the record).

        ``output`` (json mode): a narrower model for this call only (e.g. one whose patterns admit
        only this call's variable names): its schema constrains the reply and it validates the
        reply; the prompt still shows the declared schema, so the system text stays the same."""
        vars = dict(vars)
        call_schema = None
        if mode == "json":
            if output is not None:
                call_schema = output.model_json_schema()
            elif self.call_schema is not None:
                call_schema = self.call_schema(vars)
        language = vars.pop("language", None)
        messages = self.render(language, output_mode=mode, **vars)
        record: AgentRecord[T] = AgentRecord(
            agent=self.name, role=self.role, prompt=messages, cached=True, mode=mode, tag=tag
        )
        for attempt in range(self.max_attempts):
            params = self.params(llm.default_params, attempt, mode, json_schema=call_schema)
            try:
                # the run's call slot is taken inside LLM.chat, after a cache miss
                result = await llm.chat(messages, params, sample_index=sample_index, attempt=attempt, tag=tag)
            except LLMError as exc:
                if "json_schema cannot be compiled" in str(exc):
                    raise AgentSchemaError(f"agent {self.name!r} ({self.role}): {exc}") from exc
                record.calls += 1
                record.cached = False
                record.error, record.error_kind = f"llm: {exc}", "llm"
                return record
            record.calls += 1
            record.cached = record.cached and result.cached
            record.latency_s += result.latency_s
            record.usage["prompt_tokens"] += result.usage.prompt_tokens
            record.usage["completion_tokens"] += result.usage.completion_tokens
            record.reply = result.text
            record.replies.append(result.text)
            record.retried_errors += result.retried_errors
            record.choices = [self._parse_choice(c.text, mode, c.finish_reason, output) for c in result.choices]
            record.unparseable += sum(c["error"] is not None for c in record.choices)
            good = next((c for c in record.choices if c["error"] is None), None)
            if good is None:
                why = record.choices[0]["error"] if record.choices else "no choices returned"
                record.error, record.error_kind = f"parse (attempt {attempt + 1}/{self.max_attempts}): {why}", "parse"
                continue
            record.parsed, record.reply = good["parsed"], good["text"]
            record.ok, record.error, record.error_kind = True, None, None
            return record
        return record

    def _parse_choice(
        self, text: str, mode: OutputMode, finish_reason: str = "stop", output: type[BaseModel] | None = None
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"text": text, "parsed": None, "error": None}
        if finish_reason != "stop":
            choice["finish_reason"] = finish_reason
        try:
            choice["parsed"] = self.parse(text, mode, truncated=finish_reason == "length", output=output)
        except (ParseError, ValueError) as exc:  # ValueError: e.g. json's limit on huge integers
            choice["error"] = str(exc)
        return choice
