"""On-disk cache of demonstration-pool vectors, shared by every run and shard.

A pool's vectors depend only on the embedder and the pool's sentences, so they are stored once as
``<folder>/<key>.npy``, ``key`` = SHA-256 of the embedder's identity and the pool's texts in order.
A changed pool or embedder gives a new key (and is embedded again); an unreadable or misshapen
file is embedded again and rewritten. Writes are atomic with plain modes (:mod:`pipelines.io`),
so concurrent shards at worst embed the same pool twice and one rename wins.

    cache = DemoVectorCache("~/.cache/edumas/kgc-demos", identity=embedder.identity)
    vectors = cache.vectors(texts, embed)       # embed(texts) -> (n, d) array, called on a miss
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pipelines.io import atomic_open, user_cache_dir

log = logging.getLogger(__name__)


def default_folder() -> Path:
    """``$XDG_CACHE_HOME/edumas/kgc-demos`` when set, else ``~/.cache/edumas/kgc-demos``."""
    return user_cache_dir("kgc-demos")


def pool_key(identity: str, texts: list[str]) -> str:
    """SHA-256 of the embedder identity and the pool's texts, in order."""
    payload = json.dumps({"embedder": identity, "texts": texts}, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class DemoVectorCache:
    """Pool vectors stored as ``.npy`` files keyed by :func:`pool_key`."""

    def __init__(self, folder: Path | str, *, identity: str):
        self.folder = Path(folder).expanduser()
        self.identity = identity

    def path(self, texts: list[str]) -> Path:
        return self.folder / f"{pool_key(self.identity, texts)}.npy"

    def _load(self, path: Path, n: int) -> np.ndarray | None:
        try:
            vectors = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("demonstration vectors %s unreadable (%s): embedding the pool again", path, exc)
            return None
        if vectors.ndim != 2 or vectors.shape[0] != n or vectors.dtype != np.float32:
            log.warning("demonstration vectors %s: shape %s, expected (%d, d); embedding again", path, vectors.shape, n)
            return None
        return vectors

    def vectors(self, texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """The cached vectors of ``texts``, or ``embed(texts)`` stored for the next run."""
        path = self.path(texts)
        cached = self._load(path, len(texts))
        if cached is not None:
            log.info("demonstration vectors of %d sentences read from %s", len(texts), path)
            return cached
        vectors = np.ascontiguousarray(np.asarray(embed(texts), dtype=np.float32))
        try:
            with atomic_open(path, "wb") as handle:
                np.save(handle, vectors, allow_pickle=False)
        except OSError as exc:  # a read-only cache folder costs speed, not the run
            log.warning("demonstration vectors not cached at %s (%s)", path, exc)
        return vectors
