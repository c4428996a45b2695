"""How a predicted item is matched to gold: by character offsets, by text, or word-level (DuEE).

A dataset's gold says which matching it gets (:attr:`Sentence.matching`, set by its reader):

- ``offsets`` (BIO files, ACE05): a gold item is its character span, so two mentions of the same
  text are two items, as seqeval counts them. A predicted item that has offsets keeps them (NER F1
  then equals seqeval's on the same file); an answer without offsets (an LLM's ``(type, text)``)
  is placed at every occurrence of its text in the sentence (whole words where the text meets
  ASCII letters or digits; exact case first, else ignoring case and spacing), as projecting the
  answer onto the sentence's tokens does; for NER an occurrence that lies inside a longer
  predicted mention is not a mention of its own. Text that does not occur stays *unplaced* and
  can only match an unplaced gold item of the same text.
- ``text`` (RE files, which have no offsets): normalised text (:func:`norm`); duplicates count once.
- ``word`` (DuEE 1.0, the paper's "word-level matching"): each predicted trigger / argument scores
  the character-level F1 (case-insensitive) of its text with a gold one of the same event type (and
  role), the best over the gold argument's ``alias`` forms; true positives are the sum of these
  scores. Each gold item is matched at most once, greedily from the best score down (without
  this, one gold argument predicted twice would count twice). Items are counted per event, as
  the official metric lists them.

Keys (offsets and text): NER ``("entity", type, span)``, RE ``("triple", head, relation, tail)``,
EE ``("trigger", type, span)`` and ``("argument", type, role, span)``; ``span`` is ``(start, end)``
or, for text keys and unplaced items, the normalised text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

from pipelines.kgc.schema import Entity, Event, Triple

Matching = Literal["offsets", "text", "word"]
MATCHINGS: tuple[str, ...] = ("offsets", "text", "word")
DESCRIBED = {"offsets": "character offsets", "text": "text", "word": "word-level (character F1)"}


def norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def _ascii_word(char: str) -> bool:
    return char.isascii() and char.isalnum()


def occurrences(text: str, span: str) -> list[tuple[int, int]]:
    """Every ``(start, end)`` of ``span`` in ``text`` that does not cut an ASCII word (``Paris`` is
    not in ``Parisian``; Chinese characters have no such edge): exact matches, else matches that
    ignore case and the width of spaces."""
    span = str(span).strip()
    if not span:
        return []
    found = [(m.start(), m.end()) for m in re.finditer(re.escape(span), text)]
    if not found:
        loose = r"\s+".join(re.escape(part) for part in span.split())
        found = [(m.start(), m.end()) for m in re.finditer(loose, text, re.IGNORECASE)]

    def whole(start: int, end: int) -> bool:
        before = start > 0 and _ascii_word(text[start - 1]) and _ascii_word(text[start])
        after = end < len(text) and _ascii_word(text[end]) and _ascii_word(text[end - 1])
        return not (before or after)

    return [(s, e) for s, e in found if whole(s, e)]


def _placed(start: int, end: int) -> bool:
    return 0 <= start < end


def _spans(start: int, end: int, text_value: str, sentence: str | None) -> list[Any]:
    """The spans an item stands for: its own offsets, else every occurrence, else its text."""
    if _placed(start, end):
        return [(start, end)]
    found = occurrences(sentence, text_value) if sentence is not None else []
    return list(found) or [norm(text_value)]


def _inside(inner: tuple[int, int], outer: tuple[int, int]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1] and inner != outer


def keys(task: str, items: Iterable[Any], *, sentence: str | None = None, matching: str = "text") -> set[tuple]:
    """The scored keys of ``items`` under ``matching`` (``offsets`` needs ``sentence`` to place
    answers without offsets; without it, or under ``text`` / ``word``, keys hold normalised text)."""
    by_position = matching == "offsets"
    out: set[tuple] = set()
    if task == "ner":
        grounded: list[tuple[str, Any, bool]] = []
        for item in items:
            assert isinstance(item, Entity)
            if not by_position:
                out.add(("entity", item.type, norm(item.text)))
                continue
            own = _placed(item.start, item.end)
            grounded += [(item.type, span, own) for span in _spans(item.start, item.end, item.text, sentence)]
        mentions = [span for _, span, _ in grounded if isinstance(span, tuple)]
        for kind, span, own in grounded:
            nested = not own and isinstance(span, tuple) and any(_inside(span, other) for other in mentions)
            if not nested:
                out.add(("entity", kind, span))
        return out
    for item in items:
        if task == "re":
            assert isinstance(item, Triple)
            out.add(("triple", norm(item.head), item.relation, norm(item.tail)))
        elif task == "ee":
            assert isinstance(item, Event)
            if not by_position:
                out.add(("trigger", item.type, norm(item.trigger)))
                out.update(("argument", item.type, a.role, norm(a.text)) for a in item.arguments)
                continue
            out.update(("trigger", item.type, s) for s in _spans(item.start, item.end, item.trigger, sentence))
            for a in item.arguments:
                out.update(("argument", item.type, a.role, s) for s in _spans(a.start, a.end, a.text, sentence))
        else:
            raise ValueError(f"unknown task {task!r}; use ner, re or ee")
    return out


def char_f1(predicted: str, gold: str) -> float:
    """Character-level F1 of two strings (case-insensitive, spaces ignored): the DuEE metric's match."""
    p, g = Counter(norm(predicted).replace(" ", "")), Counter(norm(gold).replace(" ", ""))
    common = sum((p & g).values())
    if not common:
        return 0.0
    precision, recall = common / sum(p.values()), common / sum(g.values())
    return 2 * precision * recall / (precision + recall)


WordItem = tuple[str, tuple[str, ...], tuple[str, ...]]
"""``(kind, group, texts)``: kind ``trigger`` | ``argument``, group ``(event type,)`` or
``(event type, role)``, texts the forms that count (a gold argument's text and its aliases)."""


def word_items(events: Iterable[Event]) -> list[WordItem]:
    """Triggers and arguments of ``events`` as word-level items, per event (an argument repeated
    inside one event counts once)."""
    out: list[WordItem] = []
    for event in events:
        assert isinstance(event, Event)
        out.append(("trigger", (event.type,), (event.trigger,)))
        seen: set[tuple[str, str]] = set()
        for a in event.arguments:
            if (a.role, norm(a.text)) not in seen:
                seen.add((a.role, norm(a.text)))
                out.append(("argument", (event.type, a.role), (a.text, *a.aliases)))
    return out


def word_matches(gold: list[WordItem], predicted: list[WordItem]) -> list[tuple[int, int, float]]:
    """``(gold index, predicted index, score)`` of a one-to-one matching within each kind and group,
    best scores first; only scores above 0."""
    candidates = []
    for j, (kind, group, (text, *_)) in enumerate(predicted):
        for i, (g_kind, g_group, forms) in enumerate(gold):
            if g_kind == kind and g_group == group:
                best = max(char_f1(text, form) for form in forms)
                if best > 0:
                    candidates.append((best, i, j))
    used_gold, used_pred, out = set(), set(), []
    for best, i, j in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
        if i not in used_gold and j not in used_pred:
            used_gold.add(i)
            used_pred.add(j)
            out.append((i, j, best))
    return out
