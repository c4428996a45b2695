"""Read knowledge-base sources into documents: .txt/.md (one document per file), .jsonl and .csv
(one document per row, through the source's field mapping); folders are read recursively.

Rows are streamed line by line (a file of a million rows is never held in memory). A document id
is ``<source>/<file>#<record>``: the record is the row's ``id_field`` value or, without one, a
hash of the row's text, so inserting a row shifts no other id (identical rows are one document).
Row groups (``rows_per_document``) end at content-defined boundaries for the same reason.

Any problem that would make a build wrong raises :class:`KBBuildError` naming the file (and line,
byte offset or field) and the fix, before the store is touched. Empty files are skipped and counted.
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.io import iter_jsonl_objects
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
    line_breaks: bool = False


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


def _record_text(src: SourceConfig, row: dict[str, Any]) -> str:
    text = "\n".join(str(row[f]).strip() for f in src.text_fields if row[f] not in (None, ""))
    return _plain_text(src, text)


def _plain_text(src: SourceConfig, text: str) -> str:
    for old, new in src.replace.items():
        text = text.replace(old, new)
    return text.strip()


class _Lines:
    """Decoded lines of a file, read in binary so a bad byte is reported with its byte offset;
    ``has_content`` tells afterwards whether any line held more than whitespace."""

    def __init__(self, path: Path):
        self.path = path
        self.has_content = False

    def __iter__(self) -> Iterator[str]:
        offset = 0
        with open(self.path, "rb") as handle:
            for raw in handle:
                start = 3 if offset == 0 and raw.startswith(b"\xef\xbb\xbf") else 0
                try:
                    line = raw[start:].decode("utf-8")
                except UnicodeDecodeError as exc:
                    at = offset + start + exc.start
                    raise KBBuildError(
                        f"{self.path}: not UTF-8 (invalid byte 0x{raw[start + exc.start]:02x} at byte offset {at}); "
                        "re-save the file as UTF-8 or remove it from the source folder"
                    ) from None
                offset += len(raw)
                self.has_content = self.has_content or not line.isspace()
                yield line


def _rows(path: Path, lines: _Lines) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) pairs of a .jsonl or .csv file, streamed."""
    if path.suffix.lower() == ".jsonl":
        for number, row in iter_jsonl_objects(lines, path, error=KBBuildError):
            yield f"{path}:{number}", row
        return
    for number, row in enumerate(csv.DictReader(lines), start=2):
        yield f"{path}:{number}", dict(row)


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _groups(
    records: Iterator[tuple[str, dict[str, Any], str]], size: int
) -> Iterator[list[tuple[str, dict[str, Any], str]]]:
    """Consecutive (record, row, text) triples in groups of about ``size`` (at most ``2 * size``):
    a group ends after a row whose text hash is 0 modulo ``size`` (content-defined boundaries)."""
    group: list[tuple[str, dict[str, Any], str]] = []
    for record in records:
        group.append(record)
        if int(_digest(record[2])[:8], 16) % size == 0 or len(group) >= 2 * size:
            yield group
            group = []
    if group:
        yield group


def _document(src: SourceConfig, file_label: str, group: list[tuple[str, dict[str, Any], str]]) -> Document:
    body = "\n".join(text for _, _, text in group)
    extra = {name: ",".join(dict.fromkeys(str(row[name]) for _, row, _ in group)) for name in src.metadata_fields}
    record = group[0][0] if len(group) == 1 else f"{group[0][0]}-{group[-1][0]}"
    language = src.language if src.language != "auto" else detect_language(body)
    return Document(f"{file_label}#{record}", body, src.kind, language, file_label, extra, src.dialogue)


def iter_documents(src: SourceConfig, root: Path, stats: LoadStats | None = None) -> Iterator[Document]:
    """The documents of one source in file order, at most ``max_records`` rows of them, streamed."""
    stats = stats if stats is not None else LoadStats()
    base = root / src.path
    taken = [0]  # rows (or text files) read from this source so far, for max_records
    for path in list_files(src, root):
        stats.files += 1
        rel = path.name if base.is_file() else path.relative_to(base).as_posix()
        file_label = f"{src.name}/{rel}"
        if path.suffix.lower() in (".txt", ".md"):
            text = read_utf8(path)
            if not text.strip():
                stats.empty_files += 1
                continue
            if not _within_cap(src, stats, taken):
                continue
            body = _plain_text(src, text)
            if body:
                language = src.language if src.language != "auto" else detect_language(body)
                yield Document(f"{file_label}#0", body, src.kind, language, file_label, {}, src.dialogue)
            else:
                stats.empty_records += 1
            continue
        lines = _Lines(path)
        for group in _groups(_records(src, path, lines, stats, taken), src.rows_per_document):
            yield _document(src, file_label, group)
        if not lines.has_content:
            stats.empty_files += 1


def _within_cap(src: SourceConfig, stats: LoadStats, taken: list[int]) -> bool:
    """Count one record of ``src`` against its ``max_records`` (``taken[0]``: records of the source read
    so far): True, counted in ``records``, while under the cap; else False, counted in ``capped``."""
    if src.max_records is not None and taken[0] >= src.max_records:
        stats.capped += 1
        return False
    taken[0] += 1
    stats.records += 1
    return True


def _records(
    src: SourceConfig, path: Path, lines: _Lines, stats: LoadStats, taken: list[int]
) -> Iterator[tuple[str, dict, str]]:
    """(record id, row, text) of the non-empty rows of one file; counts rows, empty rows and capped
    rows (``taken[0]``: rows of this source read so far, against ``max_records``)."""
    for where, row in _rows(path, lines):
        _check_fields(src, row, where)
        if not _within_cap(src, stats, taken):
            continue
        text = _record_text(src, row)
        if not text:
            stats.empty_records += 1
            continue
        yield (str(row[src.id_field]) if src.id_field else f"h{_digest(text)[:12]}"), row, text


def load_source(src: SourceConfig, root: Path, stats: LoadStats | None = None) -> list[Document]:
    """All documents of one source (see :func:`iter_documents`)."""
    return list(iter_documents(src, root, stats))
