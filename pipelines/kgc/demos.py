"""In-context demonstrations: N-way K-shot, chosen from a pool by sentence-embedding distance.

The paper selects M = N x K demonstrations "with the closest Euclidean distance" to the input
sentence. :class:`DemoSelector` embeds each pool once and every query once (in batches, before
the run, off the event loop), then returns the M nearest pool sentences of a dataset (ties broken
by pool order). With M = 0 nothing is embedded. Given a :class:`DemoVectorCache`, pool vectors
and the up-front batch of query vectors are read from disk when a run or shard embedded the same
texts with the same embedder before (every shard of a run prepares the run's whole sample, so
the first run or shard embeds it and the others read it).

    selector = DemoSelector({"conllpp": pool_sentences}, embed)      # embed(texts) -> (n, d) array
    selector.prepare([s.text for s in evaluated])
    demos = selector.nearest("conllpp", sentence.text, m=1)         # [Sentence]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pipelines.kgc.agents.experts import expert_role
from pipelines.kgc.demo_cache import DemoVectorCache
from pipelines.kgc.schema import Sentence

Embed = Callable[[list[str]], np.ndarray]


class DemoSelector:
    """Nearest pool sentences per dataset by Euclidean distance of their embeddings."""

    def __init__(
        self, pools: dict[str, Sequence[Sentence]], embed: Embed | None, *, cache: DemoVectorCache | None = None
    ):
        self.pools = {name: list(pool) for name, pool in pools.items()}
        self.embed = embed
        self.cache = cache
        self._pool_vectors: dict[str, np.ndarray] = {}
        self._query_vectors: dict[str, np.ndarray] = {}

    def _vectors(self, name: str) -> np.ndarray:
        if name not in self._pool_vectors:
            texts = [s.text for s in self.pools[name]]
            if self.cache is not None:
                self._pool_vectors[name] = self.cache.vectors(texts, self.embed)
            else:
                self._pool_vectors[name] = np.asarray(self.embed(texts), dtype=np.float32)
        return self._pool_vectors[name]

    def prepare(self, queries: Sequence[str]) -> None:
        """Embed the query sentences (and every pool) once, up front."""
        if self.embed is None:
            return
        self._embed_queries(queries, cached=True)
        for name in self.pools:
            self._vectors(name)

    def _embed_queries(self, queries: Sequence[str], *, cached: bool) -> None:
        """Embed the queries not embedded yet, in one call; ``cached``: through the vector cache, as
        the pools are (the up-front batch: the same sentences give the same batch in every run and
        shard; a single late query is not worth a file)."""
        missing = sorted({q for q in queries if q not in self._query_vectors})
        if not missing:
            return
        if cached and self.cache is not None:
            vectors = self.cache.vectors(missing, self.embed)
        else:
            vectors = np.asarray(self.embed(missing), dtype=np.float32)
        for text, vector in zip(missing, vectors, strict=True):
            self._query_vectors[text] = vector

    def nearest(self, name: str, text: str, m: int) -> list[Sentence]:
        """The ``m`` pool sentences of ``name`` closest to ``text`` (the sentence itself excluded)."""
        pool = self.pools.get(name, [])
        if m <= 0 or not pool:
            return []
        if self.embed is None:
            raise ValueError("demonstrations need an embedder (set kgc.embedder.path) when shots > 0")
        if text not in self._query_vectors:
            self._embed_queries([text], cached=False)
        distances = np.linalg.norm(self._vectors(name) - self._query_vectors[text], axis=1)
        chosen = []
        for i in np.argsort(distances, kind="stable"):  # by distance, ties by pool order
            if pool[i].text != text:
                chosen.append(pool[i])
                if len(chosen) == m:
                    break
        return chosen


def demonstration_vars(
    selector: DemoSelector | None, pool: str, text: str, task: str, m: int, *, mode: str = "text"
) -> list[dict[str, str]]:
    """Template variables of the ``m`` nearest demonstrations: ``[{"text", "answer"}]``, the answer
    being the gold items in the output mode's format (the paper's tuples, or JSON)."""
    if m <= 0 or selector is None:
        return []
    role = expert_role(task)
    return [{"text": d.text, "answer": role.answer_text(d.gold(), mode=mode)} for d in selector.nearest(pool, text, m)]
