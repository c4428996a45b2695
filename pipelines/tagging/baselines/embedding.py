"""Embedding-similarity baseline: cosine between the definition's and the question's sentence
embeddings (MiniLM by default, offline from a local folder).

``mode: top_k`` (the paper's: "the judgment is determined by the top-K selection on cosine
similarity" between the knowledge and the question) ranks, for each knowledge definition (one
knowledge id in one language), its candidate questions (every evaluation-split pair of it: the
questions are known, their labels are never read) and tags the ``K`` most similar. ``top_k`` is
``K`` itself, or ``generation`` (default): ``K = round(candidates x the definition's share of
positives in the generation split)``, rounded half up (the whole generation split's share when the definition has
no generation row), so the evaluation split's labels and prior are never used. With one candidate
per definition (MathFish) ranking cannot work; use ``mode: threshold`` there.

``mode: threshold`` tags a pair when the cosine reaches ``threshold``; with ``threshold: null`` the
threshold is the one with the best accuracy on the generation split, its classes weighted to
``prior``: the generation split's own share of positives (``generation``) or a number.
How K or the threshold was chosen is returned (and reported in the metrics).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator

from pipelines.config import StrictModel
from pipelines.retrieval.config import EmbedderConfig
from pipelines.retrieval.embedders import SentenceTransformerEmbedder
from pipelines.tagging.data import TaggingExample

Embed = Callable[[list[str]], np.ndarray]


class EmbeddingBaselineConfig(StrictModel):
    model: str = Field("models/base/all-minilm-l6-v2", description="sentence-transformers folder")
    mode: Literal["top_k", "threshold"] = Field(
        "top_k",
        description="top_k (the paper: the K most similar candidate questions per definition) | threshold (cosine "
        ">= threshold)",
    )
    top_k: Literal["generation"] | Annotated[int, Field(ge=0)] = Field(
        "generation",
        description="K: generation (candidates x the definition's generation-split share of positives) | a number",
    )
    threshold: float | None = Field(
        None, ge=-1.0, le=1.0,
        description="mode threshold: null = best-accuracy threshold fitted on the generation split (its source is "
        "in the metrics)",
    )
    prior: Literal["generation"] | Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        "generation",
        description="class prior of that fit: generation (the generation split's own share) | a number in (0, 1)",
    )
    batch_size: int = Field(32, ge=1, description="encoding batch size")

    @field_validator("prior", mode="before")
    @classmethod
    def _no_evaluation_prior(cls, value: Any) -> Any:
        if value == "evaluation":
            raise ValueError(
                "'evaluation' fitted the threshold to the evaluation split's labels; use 'generation' "
                "(the generation split's own share of positives) or a number"
            )
        return "generation" if value == "training" else value


def load_embedder(model: str | Path, batch_size: int = 32) -> Embed:
    """``embed(texts) -> (n, d)`` unit-norm vectors from a local sentence-transformers folder.

    The knowledge bases' embedder serves here too, so both load and normalise a model the same way.
    """
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


def top_k_sizes(
    cfg: EmbeddingBaselineConfig, candidates: list[TaggingExample], train: list[TaggingExample]
) -> dict[tuple[str, str], int]:
    """``K`` per definition (knowledge id, language) from ``top_k`` (see the module docstring)."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for example in candidates:
        counts[example.concept] += 1
    if cfg.top_k != "generation":
        return {concept: min(int(cfg.top_k), n) for concept, n in counts.items()}
    labels: dict[tuple[str, str], list[int]] = defaultdict(list)
    for example in train:
        labels[example.concept].append(example.label)
    overall = sum(e.label for e in train) / len(train) if train else 0.5
    share = {c: (sum(v) / len(v) if v else overall) for c, v in ((c, labels.get(c, [])) for c in counts)}
    return {concept: int(np.floor(n * share[concept] + 0.5)) for concept, n in counts.items()}


def predict(
    cfg: EmbeddingBaselineConfig,
    embed: Embed,
    evaluation: list[TaggingExample],
    train: list[TaggingExample],
    *,
    candidates: list[TaggingExample] | None = None,
) -> tuple[list[int], list[float], dict]:
    """Predictions and scores of the ``evaluation`` pairs, and how they were decided: ``{"mode",
    "source"}`` with ``"top_k"`` (K per ``knowledge_id/language``) or ``"threshold"``. ``train``
    is the generation split (the threshold or K is fitted on it); ``candidates`` the questions
    ranked per definition in top_k mode (the whole evaluation split; default ``evaluation``)."""
    if cfg.mode == "top_k":
        pool = list(candidates) if candidates is not None else list(evaluation)
        ids = {e.id for e in pool}
        pool += [e for e in evaluation if e.id not in ids]
        pool_scores = cosine_scores(embed, pool)
        position = {e.id: i for i, e in enumerate(pool)}
        scores = np.array([pool_scores[position[e.id]] for e in evaluation])
        sizes = top_k_sizes(cfg, pool, train)
        ranked: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, example in enumerate(pool):
            ranked[example.concept].append(i)
        chosen = {
            pool[i].id
            for concept, idx in ranked.items()
            for i in sorted(idx, key=lambda i: (-pool_scores[i], pool[i].id))[: sizes[concept]]
        }
        how = (
            f"top {cfg.top_k} per knowledge definition"
            if cfg.top_k != "generation"
            else "top K per knowledge definition, K = its candidates x its generation-split share of positives"
        )
        info = {
            "mode": "top_k",
            "top_k": {f"{kid}/{lang}": k for (kid, lang), k in sorted(sizes.items())},
            "candidates": len(pool),
            "source": f"{how}, over {len(pool)} evaluation-split questions (labels unread)",
        }
        return [int(e.id in chosen) for e in evaluation], scores.tolist(), info
    scores = cosine_scores(embed, evaluation)
    if cfg.threshold is not None:
        info = {"mode": "threshold", "threshold": cfg.threshold, "source": "embedding.threshold in params"}
    else:
        labels = [e.label for e in train]
        if cfg.prior == "generation":
            prior = sum(labels) / max(1, len(labels))
            why = f"the generation split's own prior {prior:.2f}"
        else:
            prior, why = float(cfg.prior), f"reweighted to the prior {float(cfg.prior):.2f} in params"
        threshold = best_threshold(cosine_scores(embed, train), labels, prior=prior)
        info = {
            "mode": "threshold",
            "threshold": threshold,
            "source": f"fitted on {len(train)} generation-split pairs, {why}",
        }
    return [int(s >= info["threshold"]) for s in scores], scores.tolist(), info
