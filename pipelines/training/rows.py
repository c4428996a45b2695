"""Shared SFT/DPO row formats → the columns the trainers read.

Input rows (written by the generation stages, see the project's data formats):

- SFT: ``{"id", "source", "messages": [...], "meta"}``, the last message is the assistant target.
- DPO: ``{"id", "source", "prompt": [...], "chosen": [assistant msg], "rejected": [assistant msg], "meta"}``.

Output rows (trl's conversational prompt–completion and preference formats, one schema per kind):

- SFT: ``{"id", "source", "prompt": [...], "completion": [assistant msg], "meta": json str}``
- DPO: ``{"id", "source", "prompt": [...], "chosen": [...], "rejected": [...], "meta": json str}``

A bad row raises :class:`RowError` with a short reason; the caller counts it and keeps going.
Every exporter builds its input rows with :func:`sft_row` / :func:`dpo_row` (validated once, here).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

ROLES = {"system", "user", "assistant"}
KINDS = ("sft", "dpo")
REQUIRED_COLUMNS = {"sft": ("prompt", "completion"), "dpo": ("prompt", "chosen", "rejected")}


class RowError(ValueError):
    """One input row that cannot be used (the message is the reason)."""


def _messages(value: Any, field: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise RowError(f"{field}: expected a non-empty list of messages")
    out = []
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise RowError(f"{field}[{index}]: expected a message object")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise RowError(f"{field}[{index}].role: {role!r} is not one of {sorted(ROLES)}")
        if not isinstance(content, str) or not content.strip():
            raise RowError(f"{field}[{index}].content: empty or not a string")
        out.append({"role": role, "content": content})
    return out


def _prompt(messages: list[dict[str, str]], field: str) -> list[dict[str, str]]:
    if messages[-1]["role"] != "user":
        raise RowError(f"{field}: the prompt must end with a user message")
    return messages


def _single_assistant(value: Any, field: str) -> list[dict[str, str]]:
    messages = _messages(value, field)
    if len(messages) != 1 or messages[0]["role"] != "assistant":
        raise RowError(f"{field}: expected exactly one assistant message")
    return messages


def normalise_row(row: Any, kind: str, default_source: str) -> dict[str, Any]:
    """Validate one input row of ``kind`` and return it in the trainer's columns."""
    if not isinstance(row, dict):
        raise RowError("row is not a JSON object")
    source = row.get("source") if isinstance(row.get("source"), str) and row.get("source") else default_source
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    if kind == "sft":
        messages = _messages(row.get("messages"), "messages")
        if len(messages) < 2 or messages[-1]["role"] != "assistant":
            raise RowError("messages: the last message must be the assistant target, after a prompt")
        out = {"prompt": _prompt(messages[:-1], "messages[:-1]"), "completion": [messages[-1]]}
    elif kind == "dpo":
        out = {
            "prompt": _prompt(_messages(row.get("prompt"), "prompt"), "prompt"),
            "chosen": _single_assistant(row.get("chosen"), "chosen"),
            "rejected": _single_assistant(row.get("rejected"), "rejected"),
        }
        if _norm(out["chosen"][0]["content"]) == _norm(out["rejected"][0]["content"]):
            raise RowError("chosen and rejected are the same reply")
    else:
        raise ValueError(f"unknown kind {kind!r}; use one of {KINDS}")
    key = content_key(out, kind)
    row_id = row.get("id") if isinstance(row.get("id"), (str, int)) and str(row.get("id")) else key[:16]
    return {"id": str(row_id), "source": source, **out, "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True)}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def content_key(row: dict[str, Any], kind: str) -> str:
    """SHA-256 of a row's conversation with whitespace and case normalised (the deduplication key)."""
    parts = [[(m["role"], _norm(m["content"])) for m in row[column]] for column in REQUIRED_COLUMNS[kind]]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def prompt_key(row: dict[str, Any]) -> str:
    """SHA-256 of a row's normalised prompt: rows of one prompt share a split."""
    parts = [(m["role"], _norm(m["content"])) for m in row["prompt"]]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def conversations(row: dict[str, Any], kind: str) -> list[list[dict[str, str]]]:
    """The full conversations a row trains on (one for SFT, chosen and rejected for DPO)."""
    if kind == "sft":
        return [row["prompt"] + row["completion"]]
    return [row["prompt"] + row["chosen"], row["prompt"] + row["rejected"]]


def is_demo(row: dict[str, Any]) -> bool:
    """True for rows of the hand-written demo fixtures (``meta.fixture == "demo"``)."""
    try:
        return json.loads(row.get("meta") or "{}").get("fixture") == "demo"
    except (TypeError, ValueError):
        return False


def sft_row(
    messages: list[dict[str, str]], *, source: str, sample_id: str, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An SFT input row ``{"id": "<source>-<sample_id>", "source", "messages", "meta"}``; the last
    message is the assistant target. Raises :class:`RowError` when :func:`normalise_row` would."""
    row = {
        "id": f"{source}-{sample_id}",
        "source": source,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "meta": dict(meta or {}),
    }
    normalise_row(row, "sft", source)
    return row


def dpo_row(
    prompt: list[dict[str, str]],
    chosen: str | list[dict[str, str]],
    rejected: str | list[dict[str, str]],
    *,
    source: str,
    sample_id: str,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A DPO input row ``{"id", "source", "prompt", "chosen": [assistant], "rejected": [assistant], "meta"}``;
    ``chosen``/``rejected`` may be the reply text or the one-message list. Raises :class:`RowError`."""

    def reply(value: str | list[dict[str, str]]) -> list[dict[str, str]]:
        if isinstance(value, str):
            return [{"role": "assistant", "content": value}]
        return [{"role": m["role"], "content": m["content"]} for m in value]

    row = {
        "id": f"{source}-{sample_id}",
        "source": source,
        "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
        "chosen": reply(chosen),
        "rejected": reply(rejected),
        "meta": dict(meta or {}),
    }
    normalise_row(row, "dpo", source)
    return row
