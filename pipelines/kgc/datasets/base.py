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


class GoldError(ReaderError):
    """A file read without error whose gold cannot be scored: no gold item, or mostly labels
    outside the schema (the message names the file, the labels and the fix)."""


def check_gold(counts: FileCounts, schema: Schema, *, dataset: str, fmt: str) -> None:
    """Raise :class:`GoldError` when ``counts`` hold no gold item or more unknown labels than
    known items; a scored dataset like that would report F1 on empty gold."""
    if counts.sentences == 0:
        raise GoldError(f"{counts.path}: dataset {dataset}: the file holds no sentence; is it a {fmt} file?")
    if counts.items and counts.unknown_labels <= counts.items:
        return
    known = ", ".join(schema.types()[:12]) + (", ..." if len(schema.types()) > 12 else "")
    if not counts.unknown_labels:
        raise GoldError(
            f"{counts.path}: dataset {dataset}: {counts.sentences} sentences but no gold item; "
            f"check that the file is in the {fmt} format (kgc.datasets[].format) and holds annotations"
        )
    seen = sorted(counts.unknown.items(), key=lambda kv: -kv[1])
    labels = ", ".join(f"{label!r} x{n}" for label, n in seen[:8]) + (", ..." if len(seen) > 8 else "")
    raise GoldError(
        f"{counts.path}: dataset {dataset}: {counts.unknown_labels} gold labels are not in schema {schema.name} "
        f"and only {counts.items} items were read ({labels}); schema {schema.name} knows [{known}]. Fix: name "
        f"the schema that fits the file (kgc.datasets[].schema_name), or map the file's spellings to the schema's "
        f"names in its \"aliases\" (pipelines/kgc/schemas/{schema.name}.json or your schema file)"
    )


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
    unknown: dict[str, int] = field(default_factory=dict)  # each unknown label as the file spells it: count

    def note(self, kind: str, line: int, message: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.notes) < MAX_NOTES:
            self.notes.append(f"{self.path}:{line}: {message}")

    def note_unknown(self, label: str, line: int, message: str) -> None:
        """A label outside the schema: counted, noted, and kept by name for the error message."""
        self.unknown[label] = self.unknown.get(label, 0) + 1
        self.note("unknown_labels", line, message)

    def to_dict(self) -> dict[str, Any]:
        keys = ("path", "sentences", "items", "bad_spans", "broken_bio", "unknown_labels", "unknown", "notes")
        return {k: getattr(self, k) for k in keys}


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
