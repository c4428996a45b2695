"""What bounds a json-mode answer: :class:`AnswerBounds` per language, and the sentence's own
substrings a span may be (:func:`candidate_spans`, ``team.spans: sentence``).

The schema sent to the backend (:meth:`ExpertRole.answer_schema
<pipelines.kgc.agents.expert_role.ExpertRole.answer_schema>`) bounds everything a reply can hold, so
a schema-valid reply closes within the task's ``max_tokens`` instead of being cut off:

- type fields are enums of the dataset's schema (entity types, relation names, event types), and
  each event type admits only its own argument roles (one ``anyOf`` branch per event type);
- every span (entity, head, tail, trigger, argument) is one of the sentence's own substrings of
  at most ``span_chars`` characters (:func:`candidate_spans`; ``team.spans: sentence``, grounded
  decoding as in grammar-constrained IE), or with ``team.spans: free`` any 1 to ``span_chars``
  characters; every list at most ``items`` entries (``arguments`` per event), the reason at most
  ``reason_chars`` (xgrammar counts characters and admits no escapes inside bounded strings);
- ``reason`` comes first in every answer of a team expert (Algorithm 1: every reply r_t is a
  reasoning response that the replica simplifies away); the single-call baselines extract
  directly; every property is required.

With free spans, what the schema cannot bound (a span that does not occur in the sentence) is
counted after parsing.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import Field

from pipelines.config import StrictModel


class AnswerBounds(StrictModel):
    """Upper bounds written into a json-mode answer schema (see the module doc); choose them so
    that the longest schema-valid reply fits the task's ``max_tokens``."""

    items: int = Field(3, ge=1, description="entities / triples / events per answer")
    arguments: int = Field(2, ge=0, description="arguments per event")
    span_chars: int = Field(32, ge=1, description="characters of an entity, head, tail, trigger or argument")
    reason_chars: int = Field(80, ge=0, description="characters of a team expert's reason")


DEFAULT_BOUNDS = {"en": AnswerBounds(), "zh": AnswerBounds(span_chars=10, reason_chars=24)}
"""Per language: Chinese takes about 1.9 SmolLM2 tokens per character, English about 0.25."""


def bounds_for(language: str, table: dict[str, AnswerBounds] | None = None) -> AnswerBounds:
    """The bounds of ``language`` in ``table`` (else :data:`DEFAULT_BOUNDS`, else the English ones)."""
    for candidates in (table or {}, DEFAULT_BOUNDS):
        if language in candidates:
            return candidates[language]
    return DEFAULT_BOUNDS["en"]


_WORD = re.compile(r"\w+|[^\w\s]")
MAX_SPAN_CHOICES = 1000
"""Above this many candidate spans a call falls back to free bounded spans (OpenAI's structured
outputs admit at most 1,000 enum values per schema)."""


def candidate_spans(text: str, *, language: str, max_chars: int) -> list[str]:
    """The substrings of ``text`` a span may be (:func:`_candidate_spans`), a new list each call: every
    expert and baseline asks for the same sentence's spans, which are worked out once."""
    return list(_candidate_spans(text, language, max_chars))


@lru_cache(maxsize=4096)
def _candidate_spans(text: str, language: str, max_chars: int) -> tuple[str, ...]:
    """The substrings of ``text`` a span may be, at most ``max_chars`` characters, sorted.

    Chinese (``zh``): every run of 1 to ``max_chars`` characters that starts and ends with a letter
    or digit (text is read in characters, never split on whitespace). Other languages: runs of
    tokens (``\\w+`` or one mark) from a word that follows a space, the text's start or a mark
    after a space, to a word or mark that a space, the text's end or a mark before a space follows,
    so ``Standard & Poor``, ``U.S.``, ``Reuters`` (in ``(Reuters)``) and ``Ukraine`` (in
    ``Ukraine.``) are candidates, and ``S`` or ``May .`` are not. Quotes and backslashes count
    as spaces (no candidate holds one)."""
    spans: set[str] = set()
    text = text.replace('"', " ").replace("\\", " ")  # no quote or backslash: xgrammar admits no escape
    if language == "zh":
        for start in range(len(text)):
            for end in range(start + 1, min(len(text), start + max_chars) + 1):
                if text[start].isalnum() and text[end - 1].isalnum():
                    spans.add(text[start:end])
        return tuple(sorted(spans))
    tokens = list(_WORD.finditer(text))

    def spaced(position: int) -> bool:  # the text's edge or whitespace at ``position``
        return position < 0 or position >= len(text) or text[position].isspace()

    def opens(i: int) -> bool:
        start = tokens[i].start()
        if spaced(start - 1):
            return True
        before = tokens[i - 1]
        return before.end() == start and not before.group()[0].isalnum() and spaced(before.start() - 1)

    def closes(j: int) -> bool:
        end = tokens[j].end()
        if spaced(end):
            return True
        after = tokens[j + 1]
        return after.start() == end and not after.group()[0].isalnum() and spaced(after.end())

    for i, first in enumerate(tokens):
        if not (first.group()[0].isalnum() or first.group()[0] == "_") or not opens(i):
            continue
        for j in range(i, len(tokens)):
            if tokens[j].end() - first.start() > max_chars:
                break
            detached_mark = not tokens[j].group()[0].isalnum() and spaced(tokens[j].start() - 1)
            if closes(j) and not detached_mark:
                spans.add(text[first.start() : tokens[j].end()])
    return tuple(sorted(spans))
