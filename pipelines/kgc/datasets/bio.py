"""Column files with BIO tags: CoNLL-2003 / CoNLL++ (4 columns, ``-DOCSTART-``), OntoNotes 5.0 in
CoNLL-2012 BIO form (token first, tag last, ``#begin``/``#end document`` lines) and MSRA (one
Chinese character and its tag per line; the sentence is the characters joined without spaces).

Chunks follow seqeval's default (IOB2) reading: an entity starts at ``B-X``, or at an ``I-X`` that
does not continue an ``X`` (that ``I-X`` is also counted as broken BIO); it ends at ``O``, at a
``B-`` or at an ``I-`` of another type.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipelines.kgc.datasets.base import FileCounts, ReaderError, open_text, token_offsets
from pipelines.kgc.schema import Entity, Schema, Sentence

TAG = re.compile(r"^(O|[BI]-\S+)$")


def bio_chunks(tags: list[str]) -> tuple[list[tuple[str, int, int]], list[int]]:
    """``(type, first token, last token + 1)`` chunks of a BIO sequence, and the indices of
    ``I-`` tags that do not continue a chunk of their type (broken BIO)."""
    chunks: list[tuple[str, int, int]] = []
    broken: list[int] = []
    current: list = []  # [type, start]
    for index, tag in enumerate(tags + ["O"]):
        prefix, _, kind = tag.partition("-")
        continues = prefix == "I" and current and current[0] == kind
        if current and not continues:
            chunks.append((current[0], current[1], index))
            current = []
        if prefix == "B" or (prefix == "I" and not continues):
            if prefix == "I":
                broken.append(index)
            current = [kind, index]
    return chunks, broken


def read_bio(
    path: Path | str, schema: Schema, *, joiner: str = " ", dataset: str | None = None
) -> tuple[list[Sentence], FileCounts]:
    """Sentences of a BIO column file and its counts; ``joiner`` is ``""`` for Chinese characters."""
    name = dataset or schema.name
    counts = FileCounts(str(path))
    sentences: list[Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    lines: list[int] = []

    def flush() -> None:
        if not tokens:
            return
        text = joiner.join(tokens)
        offsets = token_offsets(tokens, joiner)
        chunks, broken = bio_chunks(tags)
        for index in broken:
            counts.note("broken_bio", lines[index], f"{tags[index]} does not continue an entity of its type")
        entities = []
        for raw, first, stop in chunks:
            label = schema.label(raw)
            if label not in schema.entity_types:
                counts.note_unknown(raw, lines[first], f"entity type {raw!r} is not in schema {schema.name}")
                continue
            start, end = offsets[first][0], offsets[stop - 1][1]
            entities.append(Entity(label, text[start:end], start, end))
        counts.sentences += 1
        counts.items += len(entities)
        sentences.append(
            Sentence(f"{name}:{lines[0]}", name, "ner", schema.language, text, entities=entities, matching="offsets")
        )
        tokens.clear()
        tags.clear()
        lines.clear()

    for number, line in enumerate(open_text(path).splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            flush()
            continue
        if (
            stripped.startswith("-DOCSTART-")
            or stripped.startswith("#begin document")
            or stripped.startswith("#end document")
        ):
            flush()
            continue
        columns = stripped.split()
        if len(columns) < 2:
            raise ReaderError(f"{path}:{number}: expected a token and its tag, got {stripped!r:.60}")
        tag = columns[-1]
        if not TAG.match(tag):
            raise ReaderError(f"{path}:{number}: tag {tag!r} is not O, B-<type> or I-<type>")
        tokens.append(columns[0])
        tags.append(tag)
        lines.append(number)
    flush()
    return sentences, counts
