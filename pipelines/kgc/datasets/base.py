"""What every reader shares: per-file counts of problems, errors naming file and line, spans.

A reader never drops a problem silently: a gold span that does not occur in its sentence, a
broken BIO sequence or an unknown label is counted in :class:`FileCounts` (with the first few
``file:line: what`` notes), and a file that cannot be read raises :class:`ReaderError` naming
the file and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.io import iter_jsonl_objects
from pipelines.kgc.schema import Schema, Sentence

MAX_NOTES = 20


class ReaderError(ValueError):
    """A file that cannot be read; the message starts with ``<file>:<line>:``."""


@dataclass
class FileCounts:
    """What one file held and what was wrong with it."""

    path: str
    sentences: int = 0
    items: int = 0
    bad_spans: int = 0
    broken_bio: int = 0
    unknown_labels: int = 0
    notes: list[str] = field(default_factory=list)

    def note(self, kind: str, line: int, message: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.notes) < MAX_NOTES:
            self.notes.append(f"{self.path}:{line}: {message}")

    def to_dict(self) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in ("path", "sentences", "items", "bad_spans", "broken_bio", "unknown_labels", "notes")
        }


@dataclass
class Dataset:
    """Sentences of one dataset with its schema and the counts of every file read."""

    name: str
    schema: Schema
    sentences: list[Sentence]
    files: list[FileCounts]

    @property
    def task(self) -> str:
        return self.schema.task

    @property
    def language(self) -> str:
        return self.schema.language


def open_text(path: Path | str) -> str:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"dataset file {path} not found")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ReaderError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None


def json_lines(path: Path | str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of a JSON-lines file, or of a JSON array file (line = index + 1)."""
    text = open_text(path)
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReaderError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ReaderError(f"{path}:{index + 1}: item {index} is not a JSON object")
            yield index + 1, row
        return
    yield from iter_jsonl_objects(text.splitlines(), path, error=ReaderError)


def field_of(row: dict[str, Any], key: str, path: Path | str, line: int, kind: type | tuple = str) -> Any:
    """``row[key]`` of the expected type, else a :class:`ReaderError` naming file and line."""
    if key not in row:
        raise ReaderError(f"{path}:{line}: missing field {key!r}")
    value = row[key]
    if not isinstance(value, kind):
        raise ReaderError(
            f"{path}:{line}: field {key!r} should be {getattr(kind, '__name__', kind)}, got {value!r:.60}"
        )
    return value


def find_span(text: str, span: str, start: int | None = None) -> tuple[int, int] | None:
    """Character offsets of ``span`` in ``text``: at ``start`` when given and it matches there,
    else the first occurrence; ``None`` when it does not occur."""
    if not span:
        return None
    if start is not None and start >= 0 and text[start : start + len(span)] == span:
        return start, start + len(span)
    found = text.find(span)
    return (found, found + len(span)) if found >= 0 else None


def token_offsets(tokens: list[str], joiner: str) -> list[tuple[int, int]]:
    """Character ``[start, end)`` of each token in ``joiner.join(tokens)``."""
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + len(joiner)
    return offsets
