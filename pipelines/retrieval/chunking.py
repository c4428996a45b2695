"""Sentence-aware chunking by characters, for Chinese and English text.

Sentence boundaries:

- a run of Chinese terminators 。！？；… (``你好吗？！``, ``……``) plus closing quotes, as one boundary;
- a run of English terminators . ! ? ; … followed by whitespace (``Really?!``, ``wait...``), except
  after a known abbreviation (``Mr.``, ``e.g.``) or a name initial (``John F. Kennedy``, ``J. K.``);
  a capital letter after a lower-case word (``group A. Then``) is a real end;
- blank lines; and, with ``line_breaks=True`` (dialogue sources, one utterance per line), every
  line break, because many utterances have no end punctuation at all.

Sentences are packed into chunks of at most ``size`` characters; the next chunk starts with the
last whole sentences of the previous one that fit in ``overlap`` characters. A chunk also ends
after an *anchor* sentence (about one in six, chosen by a hash of its text) once it is a quarter
full; a document that fits in one chunk is never cut. These content-defined boundaries make the
chunking resynchronise after an edit, so inserting a sentence changes only the chunks around it
and the later ones keep their text (and their ids). A sentence longer than ``size`` is cut into
windows of ``size`` with ``overlap``. Chunks shorter than ``min_length`` are dropped.
"""

from __future__ import annotations

import hashlib
import re

CLOSERS = "”’」』）)\"']"
CJK_END = r"[。！？；…]+[”’」』）)]*"
LATIN_END = r"[.!?;…]+[\"')\]”’]*(?=\s)"
PARAGRAPH = r"\n\s*\n"
SENTENCE_END = re.compile(f"{CJK_END}|{LATIN_END}|{PARAGRAPH}")
SENTENCE_END_LINES = re.compile(f"{CJK_END}|{LATIN_END}|{PARAGRAPH}|\n")
ABBREVIATION = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|Prof|St|vs|etc|e\.g|i\.e|No)\.$")
INITIAL = re.compile(r"(?:^|\s)[A-Z]\.$")
ANCHOR_EVERY = 6


def _is_initial(head: str) -> bool:
    """``head`` ends with a single capital and a dot that is a name initial, not a sentence end:
    the word before it is capitalised (``John F.``) or another initial (``J. K.``), or there is none."""
    match = INITIAL.search(head)
    if not match:
        return False
    before = head[: match.start()].split()
    return not before or before[-1][0].isupper()


def _not_an_end(head: str, terminators: str) -> bool:
    return terminators == "." and (ABBREVIATION.search(head) is not None or _is_initial(head))


def split_sentences(text: str, *, line_breaks: bool = False) -> list[str]:
    """Sentences of ``text`` with their trailing whitespace kept (so joining them restores the text);
    ``line_breaks`` makes every line break a boundary (dialogue: one utterance per line)."""
    pattern = SENTENCE_END_LINES if line_breaks else SENTENCE_END
    pieces: list[str] = []
    start = 0
    for match in pattern.finditer(text):
        terminators = match.group().rstrip(CLOSERS)
        head = text[start : match.start()] + terminators
        if terminators and not terminators.isspace() and _not_an_end(head, terminators):
            continue
        end = match.end()
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


def _is_anchor(sentence: str) -> bool:
    """About one sentence in ``ANCHOR_EVERY`` (chosen by a hash of its text) ends a chunk early."""
    digest = hashlib.blake2b(sentence.strip().encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") % ANCHOR_EVERY == 0


def _carry(current: list[str], overlap: int) -> tuple[list[str], int]:
    """The last whole sentences of a finished chunk that fit in ``overlap`` (never all of them)."""
    carried: list[str] = []
    carried_len = 0
    for previous in reversed(current):
        if carried_len + len(previous) > overlap or len(carried) + 1 >= len(current):
            break
        carried.insert(0, previous)
        carried_len += len(previous)
    return carried, carried_len


def chunk_text(
    text: str, size: int = 200, overlap: int = 40, min_length: int = 20, *, line_breaks: bool = False
) -> list[str]:
    """Chunks of ``text`` (stripped), in order; see the module docstring for the rules."""
    if len(text.strip()) <= size:  # a document that fits is one chunk: anchors only cut long ones
        return [text.strip()] if len(text.strip()) >= min_length else []
    units: list[tuple[str, bool]] = []
    for sentence in split_sentences(text, line_breaks=line_breaks):
        if len(sentence) > size:
            units.extend((window, False) for window in _windows(sentence, size, overlap))
        else:
            units.append((sentence, _is_anchor(sentence)))
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    carried = 0  # how many units at the start of ``current`` are overlap already in the last chunk
    anchored: list[str] | None = None  # units of the last chunk when an anchor closed it
    for unit, anchor in units:
        if len(current) > carried and length + len(unit.rstrip()) > size:
            chunks.append("".join(current).strip())
            current, length = _carry(current, overlap)
            carried, anchored = len(current), None
        if length + len(unit.rstrip()) > size:  # the carried overlap and this unit do not fit together
            current, length, carried = [], 0, 0
        current.append(unit)
        length += len(unit)
        if anchor and length >= size // 4:
            chunks.append("".join(current).strip())
            anchored = current
            current, length = _carry(current, overlap)
            carried = len(current)
    tail = current[carried:]
    if tail:
        short = len("".join(tail).strip()) < min_length
        if short and anchored is not None and len("".join(anchored + tail).rstrip()) <= size:
            chunks[-1] = "".join(anchored + tail).strip()  # an anchor must not cut off a short last bit
        else:
            chunks.append("".join(current).strip())
    return [c for c in chunks if len(c) >= min_length]
