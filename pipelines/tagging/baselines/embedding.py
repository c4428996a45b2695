"""Embedding-similarity baseline: cosine between the definition's and the question's sentence
embeddings (MiniLM by default, offline from a local folder).

``mode: threshold`` tags a pair when the cosine reaches ``threshold``; with ``threshold: null``
the threshold is the one with the best accuracy on the held-out demonstration pools.
``mode: top_k`` tags, for each knowledge id, the ``top_k`` most similar evaluated questions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from pipelines.config import StrictModel
from pipelines.tagging.data import TaggingExample

Embed = Callable[[list[str]], np.ndarray]


class EmbeddingBaselineConfig(StrictModel):
    model: str = "models/base/all-minilm-l6-v2"
    mode: Literal["threshold", "top_k"] = "threshold"
    threshold: float | None = Field(None, ge=-1.0, le=1.0)
    top_k: int = Field(2, ge=1)
    batch_size: int = Field(32, ge=1)


def load_embedder(model: str | Path, batch_size: int = 32) -> Embed:
    """``embed(texts) -> (n, d)`` unit-norm vectors from a local sentence-transformers folder.

    The knowledge bases' embedder serves here too, so both load and normalise a model the same way.
    """
    from pipelines.retrieval.config import EmbedderConfig
    from pipelines.retrieval.embedders import SentenceTransformerEmbedder

    # max_length above any model's limit: texts are cut at the model's own max_seq_length, as before
    config = EmbedderConfig(path=str(model), batch_size=batch_size, max_length=1 << 20)
    embedder = SentenceTransformerEmbedder(config)

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(embedder.encode_documents(texts).dense)

    return embed


def cosine_scores(embed: Embed, examples: list[TaggingExample]) -> np.ndarray:
    """Cosine similarity of each pair's definition and question."""
    if not examples:
        return np.zeros(0)
    definitions = sorted({e.definition for e in examples})
    vectors = embed(definitions + [e.question for e in examples])
    norms = np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
    vectors = vectors / norms
    row = {d: i for i, d in enumerate(definitions)}
    questions = vectors[len(definitions) :]
    return np.array([float(questions[i] @ vectors[row[e.definition]]) for i, e in enumerate(examples)])


def best_threshold(scores: np.ndarray, labels: list[int]) -> float:
    """The cut (midpoint between sorted scores) with the best accuracy; ties -> the lower cut."""
    if len(scores) == 0:
        return 0.5
    values = np.sort(np.unique(scores))
    cuts = (
        [values[0] - 1e-6] + [(a + b) / 2 for a, b in zip(values[:-1], values[1:], strict=False)] + [values[-1] + 1e-6]
    )
    labels_ = np.asarray(labels)
    accuracy = [float(np.mean((scores >= cut).astype(int) == labels_)) for cut in cuts]
    return float(cuts[int(np.argmax(accuracy))])


def predict(
    cfg: EmbeddingBaselineConfig, embed: Embed, evaluation: list[TaggingExample], pool: list[TaggingExample]
) -> tuple[list[int], list[float], float | None]:
    """Predictions, scores and the threshold used (None in top_k mode)."""
    scores = cosine_scores(embed, evaluation)
    if cfg.mode == "top_k":
        by_kid: dict[str, list[int]] = defaultdict(list)
        for i, example in enumerate(evaluation):
            by_kid[example.knowledge_id].append(i)
        preds = [0] * len(evaluation)
        for idx in by_kid.values():
            for i in sorted(idx, key=lambda i: -scores[i])[: cfg.top_k]:
                preds[i] = 1
        return preds, scores.tolist(), None
    threshold = cfg.threshold
    if threshold is None:
        threshold = best_threshold(cosine_scores(embed, pool), [e.label for e in pool])
    return [int(s >= threshold) for s in scores], scores.tolist(), threshold
