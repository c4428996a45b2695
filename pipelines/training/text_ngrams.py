"""Text normalisation and n-grams shared by decontamination, near-duplicate detection and the dataset card.

Space-separated text is compared as words, Chinese (and other CJK) text as characters. Normalisation
makes formatting differences vanish: Unicode NFKC (full-width digits and letters become ASCII), case
folded, thousands separators dropped (``1,000`` = ``1000``), letters and digits split apart (``3x+5`` =
``3 x + 5``) and punctuation ignored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_WORD = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)
_CHAR = re.compile(r"[^\W_]", re.UNICODE)


def normalise(text: str) -> str:
    return _THOUSANDS.sub("", unicodedata.normalize("NFKC", text).casefold())


def cjk_share(text: str) -> float:
    """Share of CJK characters among the letters and digits of ``text``."""
    chars = _CHAR.findall(text)
    return sum(bool(_CJK.match(c)) for c in chars) / len(chars) if chars else 0.0


def is_cjk(text: str) -> bool:
    """True when at least 30 % of the text's letters are CJK: it is compared character by character."""
    return cjk_share(text) >= 0.3


def words(text: str) -> list[str]:
    """Normalised word tokens (letters runs and digit runs; CJK runs split into single characters)."""
    out: list[str] = []
    for token in _WORD.findall(normalise(text)):
        out.extend(list(token) if _CJK.match(token) else [token])
    return out


def chars(text: str) -> list[str]:
    """Normalised characters without spaces or punctuation (the units of CJK text)."""
    return _CHAR.findall(normalise(text))


def units(text: str) -> list[str]:
    """The comparison units of ``text``: characters for CJK text, words otherwise."""
    return chars(text) if is_cjk(text) else words(text)


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    """Every contiguous ``n``-gram; the whole sequence when it is shorter than ``n`` (empty for no tokens)."""
    if not tokens:
        return set()
    if len(tokens) < n:
        return {tuple(tokens)}
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def distinct_n(texts: Iterable[str], n: int) -> float:
    """Distinct-n: distinct n-grams over all n-grams of the texts (1.0 = no repetition; 0.0 for no n-gram)."""
    total, seen = 0, set()
    for text in texts:
        tokens = units(text)
        grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
        total += len(grams)
        seen.update(grams)
    return round(len(seen) / total, 4) if total else 0.0
