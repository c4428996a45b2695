"""Near-duplicate rows by MinHash LSH, after the exact (normalised content) deduplication.

A row's text (all its messages) becomes a set of ``shingle``-grams of words (characters for CJK
text, :mod:`pipelines.training.text_ngrams`). Shingles found in at least ``template_share`` of a
dataset's rows (a prompt template every row repeats) are left out when the dataset has at least
``min_rows_for_template`` rows, so rows are compared on what differs between them. MinHash
signatures (``num_perm`` seeded universal hashes) are cut into LSH bands; rows sharing a band are
candidates, and a candidate pair is a near duplicate when the *exact* Jaccard similarity of the two
shingle sets is at least ``threshold`` (the signatures only find candidates). Rows are visited in
input order (the order of ``make_datasets.inputs``, then line order): the first of a group is kept,
so the representative is the same on every run.

Written here (about 60 lines with numpy) rather than taken from ``datasketch``: no extra pinned
dependency, and the candidates are verified exactly, so the result does not depend on the hash
family beyond which pairs are looked at.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from typing import Any

import numpy as np
from pydantic import Field

from pipelines.config import StrictModel
from pipelines.training.decontamination import field_texts
from pipelines.training.text_ngrams import ngrams, units

_PRIME = np.uint64(4294967311)  # the first prime above 2**32: (a * x + b) stays below 2**64


class NearDuplicateConfig(StrictModel):
    enabled: bool = Field(True, description="false: exact dedup only")
    threshold: float = Field(
        default=0.85, gt=0.0, le=1.0,
        description="exact Jaccard similarity of the two rows' shingle sets (LSH only proposes candidates)",
    )  # Jaccard similarity of the shingle sets
    shingle: int = Field(
        default=5, ge=1,
        description="words per shingle (characters for Chinese text)",
    )  # words (characters for CJK text) per shingle
    num_perm: int = Field(default=128, ge=8, description="MinHash permutations (bands x rows chosen for the threshold)")
    template_share: float = Field(
        default=0.5, gt=0.0, le=1.0,
        description="shingles in at least this share of a dataset's rows (its prompt template) are ignored...",
    )
    min_rows_for_template: int = Field(default=10, ge=2, description="...when it has at least this many rows")
    seed: int = Field(1, description="MinHash hash seed")


def row_text(row: dict[str, Any], kind: str) -> str:
    return "\n".join(field_texts(row, kind).values())


def shingle_sets(texts: list[str], cfg: NearDuplicateConfig) -> list[frozenset[tuple[str, ...]]]:
    """Each text's shingles, less those a ``template_share`` of the texts repeat."""
    sets = [frozenset(ngrams(units(text), cfg.shingle)) for text in texts]
    if len(sets) < cfg.min_rows_for_template:
        return sets
    frequency = Counter(gram for grams in sets for gram in grams)
    common = {gram for gram, count in frequency.items() if count >= cfg.template_share * len(sets)}
    return [grams - common for grams in sets]


def bands_for(threshold: float, num_perm: int) -> tuple[int, int]:
    """``(bands, rows per band)`` whose LSH step ``(1 / bands) ** (1 / rows)`` is closest to ``threshold``."""
    options = [(b, num_perm // b) for b in range(1, num_perm + 1) if num_perm % b == 0]
    return min(options, key=lambda br: (abs((1 / br[0]) ** (1 / br[1]) - threshold), br))


def signatures(sets: list[frozenset], cfg: NearDuplicateConfig) -> np.ndarray:
    rng = np.random.default_rng(cfg.seed)
    a = rng.integers(1, 2**32, size=cfg.num_perm, dtype=np.uint64)
    b = rng.integers(0, 2**32, size=cfg.num_perm, dtype=np.uint64)
    out = np.full((len(sets), cfg.num_perm), np.iinfo(np.uint64).max, dtype=np.uint64)
    for i, grams in enumerate(sets):
        if grams:
            keys = [hashlib.blake2b("\x1f".join(g).encode(), digest_size=4).digest() for g in grams]
            x = np.array([int.from_bytes(k, "little") for k in keys], dtype=np.uint64)
            out[i] = ((np.outer(x, a) + b) % _PRIME).min(axis=0)
    return out


def jaccard(x: frozenset, y: frozenset) -> float:
    return len(x & y) / len(x | y) if x or y else 1.0


def near_duplicates(
    rows: list[dict[str, Any]], kind: str, cfg: NearDuplicateConfig
) -> tuple[list[int], list[dict[str, Any]]]:
    """``(indices of the rows kept, one record per dropped row: id, kept representative, Jaccard)``."""
    sets = shingle_sets([row_text(row, kind) for row in rows], cfg)
    bands, width = bands_for(cfg.threshold, cfg.num_perm)
    sig = signatures(sets, cfg)
    buckets: dict[tuple[int, bytes], list[int]] = defaultdict(list)
    kept, dropped = [], []
    for i, grams in enumerate(sets):
        keys = [(band, sig[i, band * width : (band + 1) * width].tobytes()) for band in range(bands)]
        candidates = sorted({j for key in keys for j in buckets.get(key, ())}) if grams else []
        twin = next(((j, s) for j in candidates if (s := jaccard(grams, sets[j])) >= cfg.threshold), None)
        if twin is not None:
            j, similarity = twin
            dropped.append({"id": rows[i]["id"], "source": rows[i]["source"], "kept": rows[j]["id"],
                            "jaccard": round(similarity, 4)})  # fmt: skip
            continue
        kept.append(i)
        for key in keys:
            buckets[key].append(i)
    return kept, dropped
