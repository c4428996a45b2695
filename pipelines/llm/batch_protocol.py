"""The OpenAI Batch API's file formats, as pure functions: input lines, size limits, output lines.

The protocol (OpenAI; GLM and other providers copy it)::

    POST /files              multipart: purpose=batch, file=<JSONL, one request per line>
    POST /batches            {input_file_id, endpoint, completion_window, metadata}
    GET  /batches/{id}       status: validating, in_progress, finalizing, completed, failed, expired,
                             cancelling, cancelled; output_file_id, error_file_id, request_counts
    GET  /files/{id}/content the output (or error) file: one line per request, matched by custom_id

An input line is ``{"custom_id", "method": "POST", "url": endpoint, "body": <chat request>}``; an
output line ``{"id", "custom_id", "response": {"status_code", "request_id", "body"} | null,
"error": {"code", "message"} | null}``. Requests an expired batch did not reach come back in the
error file with code ``batch_expired``. Nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from pipelines.llm.openai_protocol import RETRYABLE_STATUS, parse_completion
from pipelines.llm.types import ChatResult

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
"""Batch statuses after which nothing more changes."""

RETRYABLE_CODES = frozenset({"batch_expired", "batch_cancelled", "batch_failed", "missing"})
"""Item error codes worth another try (with retryable HTTP statuses): the request itself was fine."""


def input_line(custom_id: str, endpoint: str, body: bytes) -> bytes:
    """One line of a batch input file (``body`` is the encoded chat request, embedded as it is, so
    the server sees the very bytes an online request would send)."""
    head = orjson.dumps({"custom_id": custom_id, "method": "POST", "url": endpoint})
    return head[:-1] + b',"body":' + body + b"}\n"


def split(lines: list[bytes], *, max_requests: int, max_bytes: int) -> list[list[int]]:
    """Indices of ``lines`` in order, cut into runs of at most ``max_requests`` lines and
    ``max_bytes`` bytes each (a single line larger than ``max_bytes`` raises ``ValueError``)."""
    runs: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index, line in enumerate(lines):
        if len(line) > max_bytes:
            raise ValueError(
                f"one request is {len(line):,} bytes, more than batch.max_file_bytes={max_bytes:,}; raise it"
            )
        if current and (len(current) >= max_requests or size + len(line) > max_bytes):
            runs.append(current)
            current, size = [], 0
        current.append(index)
        size += len(line)
    if current:
        runs.append(current)
    return runs


@dataclass
class ItemOutcome:
    """What the batch said about one request: a result, or an error (``retryable`` or not)."""

    custom_id: str
    result: ChatResult | None = None
    error: str | None = None
    code: str = ""
    retryable: bool = False


def parse_output(content: bytes, default_model: str) -> list[ItemOutcome]:
    """Every line of an output or error file; a line that cannot be read is skipped (its request is
    then missing, which is retried)."""
    outcomes = []
    for raw in content.splitlines():
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            outcomes.append(parse_line(line, default_model))
    return outcomes


def parse_line(line: dict[str, Any], default_model: str) -> ItemOutcome:
    custom_id = line["custom_id"]
    error = line.get("error") if isinstance(line.get("error"), dict) else None
    response = line.get("response") if isinstance(line.get("response"), dict) else None
    if error is not None:
        code = str(error.get("code") or "error")
        return ItemOutcome(
            custom_id,
            error=f"{code}: {error.get('message') or ''}".strip(),
            code=code,
            retryable=code in RETRYABLE_CODES,
        )
    if response is None:
        return ItemOutcome(
            custom_id, error="missing: the line has neither response nor error", code="missing", retryable=True
        )
    status = int(response.get("status_code") or 0)
    body = response.get("body")
    if status != 200:
        message = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(message, dict):
            message = message.get("message") or message
        return ItemOutcome(
            custom_id,
            error=f"HTTP {status}: {str(message)[:300]}",
            code=str(status),
            retryable=status in RETRYABLE_STATUS,
        )
    try:
        return ItemOutcome(custom_id, result=parse_completion(body, default_model))
    except (ValueError, TypeError, AttributeError) as exc:
        return ItemOutcome(custom_id, error=f"malformed: {exc}", code="malformed", retryable=True)


def batch_errors(batch: dict[str, Any]) -> str:
    """The messages of a failed batch's ``errors`` (validation failures), joined."""
    errors = batch.get("errors")
    data = errors.get("data") if isinstance(errors, dict) else None
    if not isinstance(data, list) or not data:
        return "no reason given"
    return "; ".join(str(e.get("message") or e.get("code")) for e in data[:5] if isinstance(e, dict))


def upload_form(content: bytes) -> aiohttp.FormData:
    """The multipart body of ``POST /files`` for a batch input (built anew for every attempt)."""
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    form.add_field("file", content, filename="requests.jsonl", content_type="application/jsonl")
    return form
