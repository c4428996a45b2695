"""Reading an expert's free-text reply, whatever its task: the answer after the last ``Answer:`` /
``答案：`` line (the reason before it), ``NO`` (无/没有) as an empty answer, JSON values (fenced or
bare), the bodies of ``(...)`` tuples split on commas, and the rows of a Markdown table."""

from __future__ import annotations

import json
import re
from typing import Any

ANSWER_MARK = re.compile(r"(?:final answer|answer|答案|最终答案)\s*[:：]", re.I)
NO_ANSWER = re.compile(r"^\W*(no|none|无|没有|不存在)\W*$", re.I)
TUPLE = re.compile(r"\(([^()]*)\)")
FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)(?:```|\Z)", re.S)


def answer_and_reason(text: str) -> tuple[str, str]:
    """``(answer, reason)``: the text after the last answer mark and the text before it (else the
    whole text and no reason)."""
    marks = list(ANSWER_MARK.finditer(text))
    answer = text[marks[-1].end() :] if marks else text
    reason = text[: marks[-1].start()].strip() if marks else ""
    return answer, reason


def says_no(answer: str) -> bool:
    """The answer is ``NO`` (or 无, none...), alone or on its first line."""
    return bool(
        NO_ANSWER.match(answer.strip())
        or re.match(r"^\W*(NO|无)\W*$", answer.strip().splitlines()[0] if answer.strip() else "")
    )


def json_values(text: str) -> list[Any]:
    """Every JSON value the text holds: fenced blocks, the whole text, the outermost ``{...}`` and
    ``[...]``, in that order."""
    candidates = [body for body in FENCE.findall(text)] + [text]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if start != -1 and end > start:
            candidates.append(text[start : end + 1])
    values = []
    for candidate in candidates:
        try:
            values.append(json.loads(candidate.strip()))
        except json.JSONDecodeError:
            continue
    return values


def clean(part: str) -> str:
    """A field without surrounding spaces, quotes, backticks or asterisks."""
    return part.strip().strip("'\"“”‘’`*").strip()


def split_fields(body: str) -> list[str]:
    """A tuple's body split on commas (ASCII or Chinese), each field cleaned."""
    return [clean(p) for p in re.split(r"[,，]", body)]


def table_rows(text: str) -> list[list[str]]:
    """The cleaned cells of a Markdown table's rows (separator rows and a header row dropped)."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [clean(c) for c in line.strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue
        rows.append(cells)
    header = rows[0] if rows else []
    if header and any(
        re.search(r"type|entity|head|relation|role|trigger|类型|实体|关系|角色|触发", c, re.I) for c in header
    ):
        rows = rows[1:]
    return rows
