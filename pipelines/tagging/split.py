"""The generation / evaluation split and the demonstrations drawn from it.

- :func:`split_examples`: rows go to a *generation* split (the team runs on it to make SFT rows;
  demonstrations and the trained baselines come from it) or a held-out *evaluation* split (the
  only rows scored), by row (stratified by label and concept) or by concept (whole knowledge ids,
  every language of an id on one side). An evaluated question text (:func:`question_key`: blanks
  collapsed, case folded) is never in the generation split (a data set may repeat a row, or pair
  one question with several definitions, as MathFish does): by row, rows sharing a question text
  go to the same side; by concept, knowledge ids are dealt to the evaluation side until it holds
  ``evaluation_share`` of the rows, and the generation rows whose question text is also evaluated
  (*bridging* questions, which would chain every id into one group) are left out of the run,
  counted in the record and logged. :meth:`Split.record` is what ``split.json`` and the
  prediction/SFT rows record, so the data card can tell which rows fed SFT.
- :func:`build_demonstrations`: each concept's pool is up to ``pool_per_concept`` of its own
  generation rows; a concept with fewer (a MathFish-style file has one or two rows per standard)
  is topped up from other concepts' generation rows or from a separate labelled file (less the
  rows whose question text is held out), so every question is shown ``k`` demonstrations, labels
  alternating, never its own question text.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from pipelines.config import StrictModel
from pipelines.stage import StageError
from pipelines.tagging.data import TaggingDataConfig, TaggingExample, read_examples

log = logging.getLogger(__name__)


class EmptyEvaluationSplit(StageError):
    """No row is left to evaluate; the message names the params to change."""


class SplitConfig(StrictModel):
    """Generation split (SFT rows, demonstrations, baseline training) vs held-out evaluation split."""

    by: Literal["row", "concept"] = Field(
        "row",
        description="row (stratified by label and concept) | concept (whole knowledge ids, all languages of an id "
        "together)",
    )
    evaluation_share: float = Field(
        0.67, gt=0.0, le=1.0,
        description="share of rows (by row) or of rows in whole concepts (by concept) held out for evaluation: 72 "
        "of 108 demo rows",
    )
    seed: int = Field(0, description="seed of the split")
    generation_limit: int | None = Field(
        None, ge=0,
        description="generation pairs the team runs on for SFT rows (seeded); null = all. With 8 pairs a team right "
        "on half of them without a failed sub-task leaves 0 SFT rows with probability 0.5^8 = 0.4% (2 pairs: 25%)",
    )


@dataclass
class Split:
    generation: list[TaggingExample]
    evaluation: list[TaggingExample]
    cfg: SplitConfig
    left_out: list[TaggingExample] = field(default_factory=list)  # by concept: generation rows of bridging questions
    bridging_questions: int = 0

    def record(self) -> dict[str, Any]:
        """``{"by", "evaluation_share", "seed", "counts": {...},
        "ids": {"generation": [...], "evaluation": [...]}}``; by concept also ``bridging_questions``
        and ``ids.left_out`` (with ``counts.left_out``)."""
        record = {
            "by": self.cfg.by,
            "evaluation_share": self.cfg.evaluation_share,
            "seed": self.cfg.seed,
            "counts": {"generation": len(self.generation), "evaluation": len(self.evaluation)},
            "ids": {"generation": [e.id for e in self.generation], "evaluation": [e.id for e in self.evaluation]},
        }
        if self.cfg.by == "concept":
            record["counts"]["left_out"] = len(self.left_out)
            record["ids"]["left_out"] = [e.id for e in self.left_out]
            record["bridging_questions"] = self.bridging_questions
        return record


def _key(seed: int, text: str) -> str:
    return hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()


def question_key(text: str) -> str:
    """The question text as the split compares it: blanks collapsed, case folded."""
    return " ".join(text.split()).casefold()


def _question_groups(examples: list[TaggingExample]) -> list[list[TaggingExample]]:
    """Rows sharing a question text (they stay on one side), in input order."""
    groups: dict[str, list[TaggingExample]] = defaultdict(list)
    for e in examples:
        groups[question_key(e.question)].append(e)
    return list(groups.values())


def _split_by_concept(examples: list[TaggingExample], cfg: SplitConfig) -> Split:
    """Whole knowledge ids to the evaluation side in seeded order until it holds the share; the
    generation rows of questions also evaluated are left out (and counted), never chained in."""
    by_kid: dict[str, list[TaggingExample]] = defaultdict(list)
    for e in examples:
        by_kid[e.knowledge_id].append(e)
    target, taken, in_eval = round(cfg.evaluation_share * len(examples)), 0, set()
    for kid in sorted(by_kid, key=lambda k: _key(cfg.seed, k)):
        if taken >= target:
            break
        in_eval.add(kid)
        taken += len(by_kid[kid])
    evaluation = [e for e in examples if e.knowledge_id in in_eval]
    held_out = {question_key(e.question) for e in evaluation}
    rest = [e for e in examples if e.knowledge_id not in in_eval]
    left_out = [e for e in rest if question_key(e.question) in held_out]
    bridging = sorted({question_key(e.question) for e in left_out})
    if left_out:
        log.warning(
            "tagging split by concept: %d question(s) are paired with knowledge ids on both sides (e.g. %s); "
            "their %d generation row(s) are left out so no evaluated question is in the generation split "
            "(split.json: bridging_questions, ids.left_out)",
            len(bridging), "; ".join(repr(q[:60]) for q in bridging[:3]), len(left_out),
        )
    generation = [e for e in rest if question_key(e.question) not in held_out]
    return Split(generation, evaluation, cfg, left_out=left_out, bridging_questions=len(bridging))


def split_examples(examples: list[TaggingExample], cfg: SplitConfig) -> Split:
    """Split ``examples`` (kept in input order on each side); raises :class:`EmptyEvaluationSplit`."""
    if not examples:
        raise EmptyEvaluationSplit("no tagging rows were read; check tagging.data.path and its filters")
    if cfg.by == "concept":
        split = _split_by_concept(examples, cfg)
    else:
        in_eval: set[str] = set()
        groups = _question_groups(examples)
        # label-major order, rows of one concept together, seeded order inside; a group goes to the
        # evaluation side when that keeps the evaluated count nearest share x rows seen, which
        # spreads each (label, concept) group over both sides (one row per group: every row where
        # round(i * share) steps up)
        def order(group: list[TaggingExample]) -> tuple:
            first = group[0]
            return sorted(e.label for e in group), first.knowledge_id, first.language, _key(cfg.seed, first.id)

        groups.sort(key=order)
        seen = taken = 0
        for group in groups:
            seen += len(group)
            if taken + len(group) / 2 <= seen * cfg.evaluation_share:
                in_eval.update(e.id for e in group)
                taken += len(group)
        split = Split([e for e in examples if e.id not in in_eval], [e for e in examples if e.id in in_eval], cfg)
    if not split.evaluation:
        raise EmptyEvaluationSplit(
            f"the evaluation split is empty ({len(examples)} rows, split.by {cfg.by}, "
            f"split.evaluation_share {cfg.evaluation_share}); raise tagging.split.evaluation_share"
        )
    return split


class DemoConfig(StrictModel):
    """Demonstrations shown to the single LLM and the semantic judge (and the planner's examples'
    choice): from the generation split only, never an evaluated row."""

    pool_per_concept: int = Field(
        3, ge=0,
        description="generation rows per (knowledge id, language) kept as that concept's pool",
    )
    k: int = Field(
        2, ge=0,
        description="demonstrations shown to the single LLM, and the planner's worked examples shown",
    )
    fallback: Literal["other_concepts", "file", "none"] = Field(
        "other_concepts",
        description="a concept with fewer than k rows is topped up from: other_concepts (generation split) | file | "
        "none",
    )
    file: TaggingDataConfig | None = Field(
        None,
        description="fallback: file -> a labelled file read like tagging.data, e.g. {path: data/tagging/demo.jsonl}",
    )
    strategy: Literal["random", "nearest"] = Field(
        "random",
        description="random (seeded) | nearest (closest to the definition by embedding); also picks the planner's k "
        "examples and the semantic judge's shipped example pair",
    )
    embedding_model: str = Field(
        "models/base/all-minilm-l6-v2",
        description="sentence-transformers folder for strategy: nearest",
    )
    seed: int = Field(0, description="seed of the pool / random choice")


def _balanced(rows: list[TaggingExample]) -> list[TaggingExample]:
    """Rows re-ordered so labels alternate (positive first), keeping the order within a label."""
    pos, neg = [r for r in rows if r.label == 1], [r for r in rows if r.label == 0]
    out = [r for pair in zip(pos, neg, strict=False) for r in pair]
    return out + pos[len(neg) :] + neg[len(pos) :]


class Demonstrations:
    """``for_example(example)`` -> its ``k`` demonstrations (own concept first, then the fallback)."""

    def __init__(self, rows: list[TaggingExample], fallback: list[TaggingExample], cfg: DemoConfig, embed=None):
        self.cfg = cfg
        self.embed = embed
        rng = random.Random(cfg.seed)
        by_concept: dict[tuple[str, str], list[TaggingExample]] = defaultdict(list)
        for row in sorted(rows, key=lambda r: _key(cfg.seed, r.id)):
            by_concept[row.concept].append(row)
        self.pools = {c: _balanced(v)[: cfg.pool_per_concept] for c, v in sorted(by_concept.items())}
        self.fallback = sorted(fallback, key=lambda r: _key(cfg.seed, r.id))
        rng.shuffle(self.fallback)
        self._cache: dict[tuple[str, str], tuple[list[TaggingExample], list[TaggingExample]]] = {}

    def _ranked(self, definition: str, rows: list[TaggingExample]) -> list[TaggingExample]:
        if self.cfg.strategy != "nearest" or not rows:
            return rows
        vectors = np.asarray(self.embed([definition] + [r.question for r in rows]))
        norms = np.linalg.norm(vectors, axis=1) + 1e-9
        scores = vectors[1:] @ vectors[0] / (norms[1:] * norms[0])
        return [rows[i] for i in np.argsort(-scores, kind="stable")]

    def candidates(self, example: TaggingExample) -> tuple[list[TaggingExample], list[TaggingExample]]:
        """The concept's ordered positive and negative candidates (``k + 1`` of each, so the
        example's own question can be dropped and ``k`` still alternate)."""
        concept = example.concept
        if concept not in self._cache:
            own = self._ranked(example.definition, self.pools.get(concept, []))
            extra: list[TaggingExample] = []
            if self.cfg.fallback != "none":
                others = [r for r in self.fallback if r.concept != concept and r.language == example.language]
                extra = self._ranked(example.definition, others)
            pos = [r for r in own + extra if r.label == 1]
            neg = [r for r in own + extra if r.label == 0]
            self._cache[concept] = (pos[: self.cfg.k + 1], neg[: self.cfg.k + 1])
        return self._cache[concept]

    def for_example(self, example: TaggingExample) -> list[TaggingExample]:
        """``k`` demonstrations, labels alternating (positive first), none with the example's own question text."""
        own = question_key(example.question)
        pos, neg = ([d for d in rows if question_key(d.question) != own] for rows in self.candidates(example))
        return _balanced(pos + neg)[: self.cfg.k]

    def own_pool(self, example: TaggingExample) -> list[TaggingExample]:
        """The concept's own pool (ranked like the demonstrations), less the example's question text."""
        own = question_key(example.question)
        rows = self._ranked(example.definition, self.pools.get(example.concept, []))
        return [d for d in rows if question_key(d.question) != own]

    def pool_rows(self) -> list[TaggingExample]:
        return [r for pool in self.pools.values() for r in pool]


def build_demonstrations(
    generation: list[TaggingExample],
    cfg: DemoConfig,
    *,
    root: Path | str = ".",
    embed=None,
    held_out: list[TaggingExample] = (),
) -> Demonstrations:
    """Pools from the generation split; the fallback is the generation split itself (other
    concepts) or the rows of ``cfg.file``, less any row whose question text is in ``held_out``
    (the evaluation split). ``embed(list[str]) -> array`` for ``strategy: nearest``."""
    if cfg.fallback == "file":
        if cfg.file is None:
            raise ValueError("tagging.demos.fallback is 'file' but tagging.demos.file is not set")
        fallback = read_examples(cfg.file, root)
    else:
        fallback = list(generation) if cfg.fallback == "other_concepts" else []
    hidden = {question_key(e.question) for e in held_out}
    fallback = [r for r in fallback if question_key(r.question) not in hidden]
    if cfg.strategy == "nearest" and embed is None:
        raise ValueError("tagging.demos.strategy 'nearest' needs an embedder (demos.embedding_model)")
    return Demonstrations(generation, fallback, cfg, embed)
