"""Tagging examples: readers for MathKnowCT-style JSONL/CSV files and the evaluation limit.

A row pairs a knowledge definition ``k`` with a question ``q`` and a label ``y`` (1: q tests k).
Column names are mapped from params (``fields``), labels are read through ``positive_labels``
and ``negative_labels``, so other files work without code, e.g. MathFish's CSV::

    fields: {definition: standard_description, question: text, label: aligns, id: id,
             knowledge_id: null, language: null}

A missing ``knowledge_id`` column gives each distinct definition an id ``k-<sha1[:8]>``.
A row whose label cannot be read is skipped, counted and logged (rows are forgiving); a file that
cannot be read (a folder, not UTF-8, a line that is not a JSON object, a missing column) raises
:class:`InputError` naming the file and line.
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pipelines.config import StrictModel
from pipelines.errors import InputError, read_input_text
from pipelines.io import iter_jsonl_objects

log = logging.getLogger(__name__)


class FieldMap(StrictModel):
    """Which column holds what; ``null`` for an optional column the file lacks."""

    definition: str = Field("definition", description="knowledge definition text k")
    question: str = Field("question", description="question text q")
    label: str = Field("label", description="y, read through positive_labels / negative_labels")
    id: str | None = Field("id", description="row id (null: row-<line number>)")
    knowledge_id: str | None = Field(
        "knowledge_id",
        description="knowledge id for per-id metrics (null: k-<sha1 of definition>)",
    )
    language: str | None = Field("language", description="en | zh per row (null: default_language)")
    rationale: str | None = Field("rationale", description="optional worked verdict used in CoT demonstrations")
    semantic_label: str | None = Field(
        "semantic_label",
        description="optional label of the semantic part alone (a negative row is shown to the semantic judge as No "
        "only with it)",
    )


class TaggingDataConfig(StrictModel):
    """Where the labelled pairs are and how to read them."""

    path: str = Field(
        "data/tagging/demo.jsonl",
        description="labelled pairs file (JSONL or CSV), e.g. the project's demo set data/tagging/demo.jsonl",
    )
    format: Literal["auto", "jsonl", "csv"] = Field(
        "auto",
        description="auto (by suffix: .csv/.tsv -> csv, else jsonl) | jsonl | csv",
    )
    fields: FieldMap = Field(FieldMap(), description="column -> meaning; null for a column the file lacks")
    positive_labels: list[str] = Field(
        ["1", "yes", "true", "y", "是"],
        description="label values meaning \"q tests k\" (case-insensitive)",
    )
    negative_labels: list[str] = Field(
        ["0", "no", "false", "n", "否"],
        description="label values meaning \"q does not test k\"",
    )
    default_language: Literal["en", "zh"] = Field("en", description="language of rows without a language column")
    languages: list[Literal["en", "zh"]] | None = Field(
        None,
        description="keep only these languages, e.g. [zh]; null = all",
    )
    knowledge_ids: list[str] | None = Field(None, description="keep only these knowledge ids; null = all")
    limit: int | None = Field(
        None, ge=1,
        description="evaluated pairs of the evaluation split (seeded, spread over ids/labels/languages); null = all",
    )
    seed: int = Field(0, description="seed of the limit sample")


@dataclass
class TaggingExample:
    """One (knowledge definition, question, label) pair."""

    id: str
    knowledge_id: str
    definition: str
    question: str
    label: int
    language: str = "en"
    rationale: str | None = None
    semantic_label: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def concept(self) -> tuple[str, str]:
        """Demonstrations are chosen per (knowledge id, language)."""
        return (self.knowledge_id, self.language)


def _raw_rows(path: Path, fmt: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of every row; :class:`InputError` for a file that cannot be read."""
    fmt = fmt if fmt != "auto" else ("csv" if path.suffix.lower() in (".csv", ".tsv") else "jsonl")
    text = read_input_text(path, fix="set tagging.data.path to a .jsonl or .csv file")
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
        return [(reader.line_num, row) for row in reader]
    return list(iter_jsonl_objects(text.split("\n"), path, error=InputError))  # not splitlines: U+2028 is text


def _label(value: Any, cfg: TaggingDataConfig) -> int | None:
    text = str(value).strip().lower()
    if text in {v.lower() for v in cfg.positive_labels}:
        return 1
    if text in {v.lower() for v in cfg.negative_labels}:
        return 0
    return None


def read_examples(cfg: TaggingDataConfig, root: Path | str = ".") -> list[TaggingExample]:
    """All readable rows of ``cfg.path`` (relative to ``root``), filtered by language."""
    path = Path(root) / cfg.path
    if not path.exists():
        raise FileNotFoundError(f"{path}: tagging data not found; set tagging.data.path in params.yaml")
    f = cfg.fields
    examples, skipped = [], 0
    for index, (number, row) in enumerate(_raw_rows(path, cfg.format), start=1):
        try:
            definition, question = str(row[f.definition]).strip(), str(row[f.question]).strip()
            label = _label(row[f.label], cfg)
        except KeyError as exc:
            raise InputError(f"{path}:{number}: no column {exc}; fix tagging.data.fields in params.yaml") from None
        if label is None or not definition or not question:
            skipped += 1
            continue
        kid = row.get(f.knowledge_id) if f.knowledge_id else None
        kid = str(kid) if kid not in (None, "") else "k-" + hashlib.sha1(definition.encode()).hexdigest()[:8]
        language = (row.get(f.language) if f.language else None) or cfg.default_language
        examples.append(
            TaggingExample(
                id=str(row.get(f.id) if f.id and row.get(f.id) not in (None, "") else f"row-{index}"),
                knowledge_id=kid,
                definition=definition,
                question=question,
                label=label,
                language=str(language),
                rationale=(row.get(f.rationale) or None) if f.rationale else None,
                semantic_label=_label(row[f.semantic_label], cfg) if f.semantic_label in row else None,
                meta=row.get("meta") if isinstance(row.get("meta"), dict) else {},
            )
        )
    if skipped:
        log.warning("%s: %d rows without a readable label/definition/question were skipped", path, skipped)
    if cfg.languages:
        examples = [e for e in examples if e.language in cfg.languages]
    if cfg.knowledge_ids:
        examples = [e for e in examples if e.knowledge_id in cfg.knowledge_ids]
    return examples


def limit_examples(examples: list[TaggingExample], limit: int | None, seed: int) -> list[TaggingExample]:
    """A seeded sample of ``limit`` rows, spread over concepts and labels (all rows if None)."""
    if limit is None or limit >= len(examples):
        return examples
    rng = random.Random(seed)
    groups: dict[tuple, list[TaggingExample]] = defaultdict(list)
    for example in examples:
        groups[(example.knowledge_id, example.language, example.label)].append(example)
    for rows in groups.values():
        rng.shuffle(rows)
    picked: list[TaggingExample] = []
    # round r gives knowledge id i the (language, label) pair (i + r) mod n: a small limit still
    # covers every concept, both labels and both languages
    preferred = [("en", 1), ("zh", 0), ("en", 0), ("zh", 1)]
    combos = sorted({(k[1], k[2]) for k in groups}, key=lambda c: (preferred.index(c) if c in preferred else 4, c))
    kids = sorted({k[0] for k in groups})
    keys = [
        (kid, *combos[(i + r) % len(combos)])
        for r in range(len(combos))
        for i, kid in enumerate(kids)
        if (kid, *combos[(i + r) % len(combos)]) in groups
    ]
    while len(picked) < limit:
        for key in keys:
            if groups[key] and len(picked) < limit:
                picked.append(groups[key].pop())
    order = {e.id: i for i, e in enumerate(examples)}
    return sorted(picked, key=lambda e: order[e.id])
