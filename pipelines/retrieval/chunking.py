"""Sentence-aware chunking by characters, for Chinese and English text.

Sentences end at Chinese 。！？； (plus closing quotes), at English . ! ? ; followed by whitespace,
and at blank lines. Sentences are packed into chunks of at most ``size`` characters; the next
chunk starts with the last whole sentences of the previous one that fit in ``overlap``
characters. A sentence longer than ``size`` is cut into windows of ``size`` with ``overlap``.
Chunks shorter than ``min_length`` are dropped.
"""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"(?<=[。！？；])[”’」』）)]*|(?<=[.!?;])[\"')\]]*(?=\s)|\n\s*\n")
ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|St|vs|etc|e\.g|i\.e|No)\.|\b[A-Z]\.)$")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` with their trailing whitespace kept (so joining them restores the text)."""
    pieces: list[str] = []
    start = 0
    for match in SENTENCE_END.finditer(text):
        end = match.end()
        if ABBREVIATION.search(text[start : match.start()]):
            continue
        while end < len(text) and text[end].isspace():
            end += 1
        if end > start:
            pieces.append(text[start:end])
            start = end
    if start < len(text):
        pieces.append(text[start:])
    return [p for p in pieces if p.strip()]


def _windows(sentence: str, size: int, overlap: int) -> list[str]:
    step = size - overlap
    return [sentence[i : i + size] for i in range(0, max(len(sentence) - overlap, 1), step)]


def chunk_text(text: str, size: int = 200, overlap: int = 40, min_length: int = 20) -> list[str]:
    """Chunks of ``text`` (stripped), in order; see the module docstring for the rules."""
    units: list[str] = []
    for sentence in split_sentences(text):
        units.extend(_windows(sentence, size, overlap) if len(sentence) > size else [sentence])
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for unit in units:
        if current and length + len(unit.rstrip()) > size:
            chunks.append("".join(current).strip())
            carried: list[str] = []
            carried_len = 0
            for previous in reversed(current):
                if carried_len + len(previous) > overlap or len(carried) + 1 >= len(current):
                    break
                carried.insert(0, previous)
                carried_len += len(previous)
            if carried_len + len(unit.rstrip()) > size:
                carried, carried_len = [], 0
            current, length = carried, carried_len
        current.append(unit)
        length += len(unit)
    if current:
        chunks.append("".join(current).strip())
    return [c for c in chunks if len(c) >= min_length]
