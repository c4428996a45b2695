"""Embedded chunks waiting to be written, kept on disk instead of in memory.

A build embeds every new chunk before it writes anything (so a failing model leaves the store as
it was), but holding a million vectors in memory does not fit. :class:`Spill` appends each
embedded batch of one kind to a raw float32 file (``<kind>.f32``) and the chunks' ids, texts and
metadata to a JSONL file (``<kind>.jsonl``); chunks whose metadata changed go to
``<kind>.relabel.jsonl``. The write step reads them back in batches: memory stays flat.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


class Spill:
    """Embedded chunks and relabels of one kind, under ``folder`` (a temporary directory)."""

    def __init__(self, folder: Path, kind: str):
        self.rows_path = folder / f"{kind}.jsonl"
        self.vectors_path = folder / f"{kind}.f32"
        self.relabel_path = folder / f"{kind}.relabel.jsonl"
        self.dim = 0
        self.rows = 0
        self.relabels = 0

    def add(self, ids: list[str], texts: list[str], metas: list[dict[str, Any]], vectors: np.ndarray) -> None:
        """Append one embedded batch (``vectors``: one float32 row per id)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(vectors) != len(ids):
            raise ValueError(f"{len(vectors)} vectors for {len(ids)} chunks")
        if not len(ids):
            return
        self.dim = self.dim or vectors.shape[1]
        with open(self.vectors_path, "ab") as handle:
            vectors.tofile(handle)
        with open(self.rows_path, "a", encoding="utf-8") as handle:
            for row in zip(ids, texts, metas, strict=True):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.rows += len(ids)

    def add_relabel(self, chunk_id: str, meta: dict[str, Any]) -> None:
        with open(self.relabel_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps([chunk_id, meta], ensure_ascii=False) + "\n")
        self.relabels += 1

    def batches(self, size: int) -> Iterator[tuple[list[str], list[str], np.ndarray, list[dict[str, Any]]]]:
        """(ids, texts, vectors, metadatas) of the embedded chunks, ``size`` at a time, in order."""
        if not self.rows:
            return
        vectors = np.memmap(self.vectors_path, dtype=np.float32, mode="r").reshape(self.rows, self.dim)
        with open(self.rows_path, encoding="utf-8") as handle:
            start = 0
            while start < self.rows:
                rows = [json.loads(handle.readline()) for _ in range(min(size, self.rows - start))]
                yield (
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    np.array(vectors[start : start + len(rows)]),
                    [r[2] for r in rows],
                )
                start += len(rows)
        del vectors

    def relabel_batches(self, size: int) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
        """(ids, metadatas) of the chunks whose metadata changed, ``size`` at a time."""
        if not self.relabels:
            return
        with open(self.relabel_path, encoding="utf-8") as handle:
            batch: list[list[Any]] = []
            for line in handle:
                batch.append(json.loads(line))
                if len(batch) == size:
                    yield [b[0] for b in batch], [b[1] for b in batch]
                    batch = []
            if batch:
                yield [b[0] for b in batch], [b[1] for b in batch]
