"""Read knowledge-base sources into documents: .txt/.md (one document per file), .jsonl and .csv
(one document per row, through the source's field mapping); folders are read recursively.

Any problem that would make a build wrong raises :class:`KBBuildError` naming the file (and line,
byte offset or field) and the fix, before the store is touched. Empty files are skipped and counted.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.retrieval.config import SourceConfig

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


class KBBuildError(RuntimeError):
    """A build that cannot go on; the previous knowledge base is left as it was."""


@dataclass
class Document:
    """One document: ``doc_id`` is ``<file relative to the source root>#<record>``."""

    doc_id: str
    text: str
    kind: str
    language: str
    file: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadStats:
    files: int = 0
    empty_files: int = 0
    records: int = 0
    empty_records: int = 0
    capped: int = 0


def detect_language(text: str) -> str:
    """``zh`` when CJK characters make up at least a fifth of the non-space characters, else ``en``."""
    letters = [c for c in text if not c.isspace()]
    if not letters:
        return "en"
    return "zh" if len(CJK.findall(text)) / len(letters) >= 0.2 else "en"


def read_utf8(path: Path) -> str:
    """Decode a file as UTF-8 (a BOM is dropped); otherwise fail naming the file and byte offset."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise KBBuildError(
            f"{path}: not UTF-8 (invalid byte 0x{data[exc.start]:02x} at byte offset {exc.start}); "
            "re-save the file as UTF-8 or remove it from the source folder"
        ) from None


def list_files(src: SourceConfig, root: Path) -> list[Path]:
    """Files of a source in sorted order; a missing path raises (optional ones are handled by the caller)."""
    path = root / src.path
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise KBBuildError(f"source '{src.name}': {path} does not exist; fix build_kb.sources[].path in params.yaml")
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in src.extensions)


def _check_fields(src: SourceConfig, row: dict[str, Any], where: str) -> None:
    """Raise naming the row when a mapped text, id or metadata field is missing."""
    for key, names in (("text_fields", src.text_fields), ("id_field", [src.id_field] if src.id_field else [])):
        missing = [f for f in names if f not in row]
        if missing:
            raise KBBuildError(
                f"{where}: field(s) {missing} not found (available: {sorted(row)}); "
                f"fix build_kb.sources['{src.name}'].{key} in params.yaml"
            )
    missing = [f for f in src.metadata_fields if f not in row]
    if missing:
        raise KBBuildError(
            f"{where}: metadata field(s) {missing} not found (available: {sorted(row)}); "
            f"fix build_kb.sources['{src.name}'].metadata_fields in params.yaml"
        )


def _record_text(src: SourceConfig, row: dict[str, Any], where: str) -> str:
    text = "\n".join(str(row[f]).strip() for f in src.text_fields if row[f] not in (None, ""))
    for old, new in src.replace.items():
        text = text.replace(old, new)
    return text.strip()


def _plain_text(src: SourceConfig, text: str) -> str:
    for old, new in src.replace.items():
        text = text.replace(old, new)
    return text.strip()


def _rows(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) pairs of a .jsonl or .csv file."""
    if path.suffix.lower() == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise KBBuildError(f"{path}:{number}: not valid JSON ({exc.msg}); fix or remove the line") from None
            if not isinstance(row, dict):
                raise KBBuildError(f"{path}:{number}: expected a JSON object per line")
            rows.append((f"{path}:{number}", row))
        return rows
    reader = csv.DictReader(io.StringIO(text))
    return [(f"{path}:{number}", dict(row)) for number, row in enumerate(reader, start=2)]


def load_source(src: SourceConfig, root: Path, stats: LoadStats | None = None) -> list[Document]:
    """All documents of one source, at most ``max_records`` of them (in file order)."""
    stats = stats if stats is not None else LoadStats()
    base = root / src.path
    docs: list[Document] = []
    taken = 0
    for path in list_files(src, root):
        stats.files += 1
        text = read_utf8(path)
        rel = path.name if base.is_file() else path.relative_to(base).as_posix()
        file_label = f"{src.name}/{rel}"
        if not text.strip():
            stats.empty_files += 1
            continue
        plain = path.suffix.lower() in (".txt", ".md")
        entries = [(str(path), "0", {"text": text})] if plain else []
        for index, (where, row) in enumerate([] if plain else _rows(path, text)):
            _check_fields(src, row, where)
            entries.append((where, str(row[src.id_field]) if src.id_field else str(index), row))
        if src.max_records is not None:
            room = max(0, src.max_records - taken)
            stats.capped += max(0, len(entries) - room)
            entries = entries[:room]
        stats.records += len(entries)
        taken += len(entries)
        for start in range(0, len(entries), src.rows_per_document):
            group = entries[start : start + src.rows_per_document]
            texts = [_plain_text(src, text) if plain else _record_text(src, row, where) for where, _, row in group]
            body = "\n".join(t for t in texts if t)
            if not body:
                stats.empty_records += len(group)
                continue
            extra: dict[str, str] = {}
            for name in [] if plain else src.metadata_fields:
                extra[name] = ",".join(dict.fromkeys(str(row[name]) for _, _, row in group))
            record = group[0][1] if len(group) == 1 else f"{group[0][1]}-{group[-1][1]}"
            language = src.language if src.language != "auto" else detect_language(body)
            docs.append(Document(f"{file_label}#{record}", body, src.kind, language, file_label, extra))
    return docs
