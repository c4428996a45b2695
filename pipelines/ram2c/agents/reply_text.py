"""Reading a RAM2C reply, shared by every role's parser: the JSON object in it (a reply in json
mode, or one a small model wrote in text mode), one field of that object, and the reply's text
without a leading label, code fences or wrapping quotes."""

from __future__ import annotations

import json
import re
from typing import Any

from pipelines.agents import ParseError

LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:teacher|reply|final reply|improved reply|revised reply|response|answer|student|question|"
    r"analysis|老师|教师|回复|最终回复|改进后的回复|回答|学生|问题|分析)(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*",
    re.I,
)
QUOTES = "\"'“”‘’「」`"


def json_dict(text: str) -> dict[str, Any] | None:
    """The JSON object from the first ``{`` to the last ``}`` of ``text``, or None when there is none."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except (json.JSONDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def json_field(text: str, field: str) -> Any:
    """``field`` of the first JSON object in ``text``, or None when there is none."""
    data = json_dict(text)
    return data.get(field) if data is not None else None


def clean_text(text: str) -> str:
    """Reply text without a leading label (``Teacher:``, ``回复：``), code fences or wrapping quotes."""
    text = text.strip().removeprefix("```").removesuffix("```").strip()
    text = LABEL.sub("", text, count=1).strip()
    if len(text) > 1 and text[0] in QUOTES and text[-1] in QUOTES:
        text = text[1:-1].strip()
    return text


def text_of(reply: str, field: str) -> str:
    """The cleaned text of the JSON ``field`` of ``reply``, else of the whole reply; ParseError when
    nothing is left."""
    value = json_field(reply, field)
    text = clean_text(value if isinstance(value, str) else reply)
    if not text:
        raise ParseError(f"no {field} text in the reply")
    return text
