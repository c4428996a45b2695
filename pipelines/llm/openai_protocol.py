"""The OpenAI chat-completions wire format, as pure functions: request fields, reply parsing, error codes.

Used by :mod:`pipelines.llm.openai_backend`, which does the I/O. Nothing here touches the network.
"""

from __future__ import annotations

import email.utils
import ipaddress
import re
import time
from typing import Any
from urllib.parse import urlsplit

import orjson

from pipelines.llm.types import ChatResult, Choice, Usage

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 524, 529})
"""Statuses worth another attempt; any other non-2xx status fails at once."""

PERMANENT_429_CODES = frozenset(
    {
        # OpenAI: billing, spend and quota limits (error.type / error.code)
        "insufficient_quota",
        "credit_balance_exhausted",
        "organization_spend_limit_exceeded",
        "project_spend_limit_exceeded",
        "organization_usage_limit_exceeded",
        "billing_hard_limit_reached",
        # GLM (Zhipu / Z.AI) account codes sent with HTTP 429: inactive, missing, locked, in arrears
        "1110",
        "1111",
        "1112",
        "1113",
        "1121",
    }
)
"""Error codes that make a 429 permanent: waiting does not help, so the call fails at once.
(DeepSeek's insufficient balance is HTTP 402, which is never retried.)"""

FALLBACK = {"json_schema": "json_object", "json_object": "none"}
"""The structured-output mode tried next when a server refuses ``response_format``."""
MODES = ("json_schema", "json_object", "none")

FORMAT_REFUSAL = re.compile(r"response_format|json_schema|json_object|structured|schema", re.I)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


_SCALARS = {str, int, float, bool, type(None)}


def strict_allowed(schema: dict[str, Any]) -> bool:
    """Whether OpenAI's strict mode can take ``schema``: an object at the root, and every object in
    it closed (``additionalProperties: false``) with all its properties required."""
    if schema.get("type") != "object":
        return False

    def closed(node: Any) -> bool:
        if isinstance(node, list):  # only dicts and lists can hold an object (an enum's strings cannot)
            if set(map(type, node)) <= _SCALARS:  # e.g. a sentence's 1,000 candidate spans, checked at C speed
                return True
            return all(closed(item) for item in node if isinstance(item, dict | list))
        if not isinstance(node, dict):
            return True
        if node.get("type") == "object" or isinstance(node.get("properties"), dict):
            properties = node.get("properties") or {}
            if node.get("additionalProperties") is not False or set(node.get("required") or []) != set(properties):
                return False
        return all(closed(value) for value in node.values() if isinstance(value, dict | list))

    return closed(schema)


_FORMATS: dict[tuple[int, str], tuple[dict[str, Any], dict[str, Any]]] = {}  # (id(schema), mode) -> (schema, field)


def response_format(schema: dict[str, Any] | None, mode: str) -> dict[str, Any] | None:
    """The ``response_format`` field for ``schema`` under ``structured_output`` mode, or None.

    An agent sends the same schema object with every call: its field is worked out once (the cache
    holds the schema too, so its id is never reused while cached) and sent as the same value."""
    if schema is None or mode == "none":
        return None
    if mode == "json_object":
        return {"type": "json_object"}
    cached = _FORMATS.get((id(schema), mode))
    if cached is not None and cached[0] is schema:
        return cached[1]
    field = _json_schema_format(schema)
    if len(_FORMATS) >= 256:
        _FORMATS.clear()
    _FORMATS[(id(schema), mode)] = (schema, field)
    return field


def _json_schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "response"))[:64]
    spec: dict[str, Any] = {"name": name, "schema": schema}
    if strict_allowed(schema):
        spec["strict"] = True
    return {"type": "json_schema", "json_schema": spec}


def plain_http_remote(url: str) -> bool:
    """True for an ``http://`` URL whose host is not loopback (an API key would travel unencrypted)."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        return False
    host = (parts.hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def error_codes(body: bytes) -> set[str]:
    """``error.code`` and ``error.type`` of an error reply, as strings (empty when absent)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return set()
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return set()
    return {str(error[k]) for k in ("code", "type") if error.get(k) is not None}


def server_message(body: bytes) -> str:
    """The human part of an error reply: ``error.message``, ``error``, ``detail``, or the raw text."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").strip()[:500]
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message") or error
        if error is not None:
            return str(error)[:500]
    return str(data)[:500]


def reported_tokens(data: dict[str, Any]) -> int | None:
    """Prompt + completion tokens of a decoded reply, or None when the server reported no usage."""
    usage = data.get("usage")
    if not isinstance(usage, dict) or (usage.get("prompt_tokens") is None and usage.get("completion_tokens") is None):
        return None
    return int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)


def parse_completion(data: Any, default_model: str) -> ChatResult:
    """A :class:`ChatResult` from a decoded ``chat.completion`` body; raises ``ValueError`` if malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ValueError("reply has no 'choices' list")
    choices = []
    for item in sorted(data["choices"], key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0):
        message = item.get("message") if isinstance(item, dict) else None
        if not isinstance(message, dict):
            raise ValueError("a choice has no 'message' object")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"message content is {type(content).__name__}, not text")
        choices.append(Choice(text=content or "", finish_reason=item.get("finish_reason") or "unknown"))
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return ChatResult(
        choices=choices,
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        ),
        model=str(data.get("model") or default_model),
    )
