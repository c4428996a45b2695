"""Generic reply parsers shared by every team: verdict tags, JSON objects, code blocks, numbers,
identifiers.

Every function takes raw reply text and returns a plain value or raises
:class:`pipelines.agents.ParseError` saying what it looked for.
"""

from __future__ import annotations

import builtins
import json
import keyword
import re
from collections.abc import Iterator
from typing import Any

import hjson
import pydantic_core


class ParseError(ValueError):
    """A reply that does not have the expected form; the message says what was missing."""


VERDICT_TAG = re.compile(r"<\s*(yes|no|是|否)\s*>", re.I)
VERDICT_LINE = re.compile(r"(?:answer|verdict|judg(?:e)?ment|答案|结论|判断)\s*[:：]\s*[*_`\s]*(yes|no|是|否)\b", re.I)
POSITIVE = {"yes", "是"}
NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)


def find_verdict(text: str) -> tuple[bool, str]:
    """The last ``<Yes>``/``<No>`` (or ``<是>``/``<否>``, or ``Answer: Yes``) and the text before it."""
    tags = list(VERDICT_TAG.finditer(text))
    match = tags[-1] if tags else None
    if match is None:
        lines = list(VERDICT_LINE.finditer(text))
        match = lines[-1] if lines else None
    if match is None:
        raise ParseError("no verdict found; expected <Yes> or <No>")
    return match.group(1).lower() in POSITIVE, text[: match.start()].strip()


def to_number(value: Any) -> int | float:
    """A JSON value or text like ``"1,250 yuan"`` as int/float; raises ParseError if none."""
    if isinstance(value, bool):
        raise ParseError(f"boolean {value!r} is not a number")
    if isinstance(value, (int, float)):
        return value
    match = NUMBER.search(str(value))
    if not match:
        raise ParseError(f"{value!r} is not a number")
    text = match.group(0).replace(",", "")
    return float(text) if "." in text else int(text)


def identifier(name: str) -> str:
    """A safe Python variable name for ``name`` (``"unit price"`` -> ``unit_price``)."""
    clean = re.sub(r"\W+", "_", str(name).strip(), flags=re.ASCII).strip("_").lower()
    if not clean:
        raise ParseError(f"argument name {name!r} has no usable characters")
    if clean[0].isdigit():
        clean = "v_" + clean
    reserved = keyword.iskeyword(clean) or clean in {"true", "false", "none"} or clean in vars(builtins)
    return clean + "_" if reserved else clean


def json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a reply (fenced or bare): strict JSON, else read leniently by Hjson
    (single quotes, trailing or missing commas: ``{"reply": "it's fine",}``)."""
    candidates = [body for lang, body in FENCE.findall(text) if lang.lower() in ("", "json")]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        candidate = candidate.strip()
        for read in (json.loads, _lenient):
            try:
                value = read(candidate)
            except (ValueError, RecursionError):  # json's and hjson's decode errors are ValueErrors
                continue
            if isinstance(value, dict):
                return value
    raise ParseError("no JSON object found")


def _lenient(text: str) -> Any:
    return hjson.loads(text, object_pairs_hook=dict)


def code_block(text: str) -> str:
    """Code from a fenced block (python or unlabelled), else the whole reply if it looks like code."""
    for lang, body in FENCE.findall(text):
        if lang.lower() in ("", "python", "py", "python3") and body.strip():
            return body.strip("\n")
    if "print(" in text:
        return text.strip()
    raise ParseError("no code block found; expected ```python ... ```")


def truncated_json_objects(text: str, limit: int = 400) -> Iterator[dict[str, Any]]:
    """Objects read from a reply cut off by the length limit (a valid JSON prefix, as constrained
    decoding writes it), longest first: each prefix that ``pydantic_core.from_json`` reads as a
    partial document (its open string and brackets closed). The caller keeps the first one its
    schema accepts (a cut-off last item is dropped by the next shorter prefix)."""
    start = text.find("{")
    if start == -1:
        return
    body = text[start:].rstrip()
    cuts = [len(body)] + [i + 1 for i in range(len(body) - 2, 0, -1) if body[i] in '"}]0123456789el']
    seen: list[Any] = []
    for cut in cuts[:limit]:
        try:  # a prefix read as JSON with its open string and brackets closed
            value = pydantic_core.from_json(body[:cut], allow_partial="trailing-strings")
        except ValueError:
            continue
        if isinstance(value, dict) and value not in seen:
            seen.append(value)
            yield value
