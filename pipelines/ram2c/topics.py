"""Discussion topics (Q): one question per (passage, Bloom level, learning direction), spread over
passages and levels, then filtered: excluded themes dropped, near-duplicates (cosine similarity of
their embeddings above ``max_similarity``) dropped, first ``n`` kept.

    plans = topic_plans(passages, cfg.topics, n_candidates, language="en")
    records = await asyncio.gather(*(write(plan) for plan in plans))      # topic_writer agent
    kept, dropped = select_topics(candidates, embed, cfg.topics, n, language="en")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipelines.ram2c.config import TopicConfig
from pipelines.ram2c.scenario import load_scenario, theme_words
from pipelines.ram2c.sources import Passage


@dataclass(frozen=True)
class TopicPlan:
    """What one topic_writer call is asked for."""

    index: int
    passage: Passage
    level: str
    direction: str

    def vars(self, language: str, avoid: list[str]) -> dict:
        scenario = load_scenario()
        return {
            "book": self.passage.book,
            "chapter": self.passage.chapter,
            "passage": self.passage.text,
            "level": scenario["levels"][self.level][language],
            "direction": scenario["directions"][self.direction][language],
            "avoid": avoid,
            "language": language,
        }


@dataclass(frozen=True)
class Topic:
    plan: TopicPlan
    question: str


def topic_plans(passages: list[Passage], cfg: TopicConfig, n: int) -> list[TopicPlan]:
    """``n`` plans cycling passages, levels and directions so that neighbours differ in all three."""
    if not passages:
        raise ValueError("no passages to write topics about; check ram2c.sources")
    levels, directions = cfg.levels, cfg.directions
    return [
        TopicPlan(
            i, passages[i % len(passages)], levels[i % len(levels)], directions[(i // len(levels)) % len(directions)]
        )
        for i in range(n)
    ]


def mentions(text: str, words: list[str]) -> str | None:
    """The first of ``words`` found in ``text`` (case-insensitive; whole words for Latin script)."""
    lowered = f" {text.lower()} "
    for word in words:
        w = word.lower()
        if w.isascii():
            padded = [f" {w}{c}" for c in " ?.,!;:'s"]
            if any(p in lowered for p in padded):
                return word
        elif w in lowered:
            return word
    return None


def select_topics(
    topics: list[Topic],
    embed: Callable[[list[str]], np.ndarray],
    cfg: TopicConfig,
    n: int,
    *,
    language: str,
) -> tuple[list[Topic], list[dict]]:
    """The first ``n`` topics free of excluded themes and of near-duplicates; and why the rest went.

    ``embed`` maps texts to unit vectors (rows). Returns (kept, dropped) where each dropped entry is
    ``{"question", "reason": "excluded theme: <word>" | "duplicate", "similarity"?}``.
    """
    words = theme_words(cfg.excluded_themes, language)
    kept: list[Topic] = []
    dropped: list[dict] = []
    candidates = []
    for topic in topics:
        hit = mentions(topic.question, words)
        if hit:
            dropped.append({"question": topic.question, "reason": f"excluded theme: {hit}"})
        else:
            candidates.append(topic)
    vectors = embed([t.question for t in candidates]) if candidates else np.zeros((0, 1))
    kept_vectors: list[np.ndarray] = []
    for topic, vector in zip(candidates, vectors, strict=True):
        if len(kept) == n:
            break
        similarity = max((float(vector @ v) for v in kept_vectors), default=0.0)
        if similarity > cfg.max_similarity:
            dropped.append({"question": topic.question, "reason": "duplicate", "similarity": round(similarity, 4)})
            continue
        kept.append(topic)
        kept_vectors.append(vector)
    return kept, dropped
