"""Embedding-similarity baseline: cosine between the definition's and the question's sentence
embeddings (MiniLM by default, offline from a local folder).

``mode: threshold`` tags a pair when the cosine reaches ``threshold``; with ``threshold: null``
the threshold is the one with the best accuracy on the generation split, its classes reweighted to
``prior``: the evaluation split's share of positives (default; a demo set's pools are balanced,
its evaluated pairs are not), the generation split's own share, or a number. The source of the
threshold used is returned (and reported in the metrics).
``mode: top_k`` tags, for each knowledge id, the ``top_k`` most similar evaluated questions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from pipelines.config import StrictModel
from pipelines.tagging.data import TaggingExample

Embed = Callable[[list[str]], np.ndarray]


class EmbeddingBaselineConfig(StrictModel):
    model: str = "models/base/all-minilm-l6-v2"
    mode: Literal["threshold", "top_k"] = "threshold"
    threshold: float | None = Field(None, ge=-1.0, le=1.0)
    prior: Literal["evaluation", "training"] | Annotated[float, Field(gt=0.0, lt=1.0)] = "evaluation"
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


def best_threshold(scores: np.ndarray, labels: list[int], *, prior: float | None = None) -> float:
    """The cut (midpoint between sorted scores) with the best accuracy; ties -> the lower cut.
    With ``prior`` the accuracy weights the classes as if a share ``prior`` of pairs were positive."""
    if len(scores) == 0:
        return 0.5
    labels_ = np.asarray(labels)
    weights = np.ones(len(labels_))
    share = float(labels_.mean())
    if prior is not None and 0.0 < share < 1.0:
        weights = np.where(labels_ == 1, prior / share, (1.0 - prior) / (1.0 - share))
    values = np.sort(np.unique(scores))
    cuts = (
        [values[0] - 1e-6] + [(a + b) / 2 for a, b in zip(values[:-1], values[1:], strict=False)] + [values[-1] + 1e-6]
    )
    accuracy = [float(np.sum(weights * ((scores >= cut).astype(int) == labels_))) for cut in cuts]
    return float(cuts[int(np.argmax(accuracy))])


def predict(
    cfg: EmbeddingBaselineConfig, embed: Embed, evaluation: list[TaggingExample], train: list[TaggingExample]
) -> tuple[list[int], list[float], dict]:
    """Predictions, scores and ``{"threshold", "source"}`` of the cut used (threshold None in top_k mode);
    ``train`` is the generation split the threshold is fitted on."""
    scores = cosine_scores(embed, evaluation)
    if cfg.mode == "top_k":
        by_kid: dict[str, list[int]] = defaultdict(list)
        for i, example in enumerate(evaluation):
            by_kid[example.knowledge_id].append(i)
        preds = [0] * len(evaluation)
        for idx in by_kid.values():
            for i in sorted(idx, key=lambda i: -scores[i])[: cfg.top_k]:
                preds[i] = 1
        return preds, scores.tolist(), {"threshold": None, "source": f"top {cfg.top_k} per knowledge id"}
    if cfg.threshold is not None:
        info = {"threshold": cfg.threshold, "source": "embedding.threshold in params"}
    else:
        labels = [e.label for e in train]
        if cfg.prior == "evaluation":
            prior = sum(e.label for e in evaluation) / max(1, len(evaluation))
            why = f"reweighted to the evaluation prior {prior:.2f}"
        elif cfg.prior == "training":
            prior = sum(labels) / max(1, len(labels))
            why = f"the generation split's own prior {prior:.2f}"
        else:
            prior, why = float(cfg.prior), f"reweighted to the prior {float(cfg.prior):.2f} in params"
        threshold = best_threshold(cosine_scores(embed, train), labels, prior=prior)
        info = {"threshold": threshold, "source": f"fitted on {len(train)} generation-split pairs, {why}"}
    return [int(s >= info["threshold"]) for s in scores], scores.tolist(), info
