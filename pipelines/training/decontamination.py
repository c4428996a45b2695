"""Decontamination: no training row may carry an item the ``evaluate`` stage scores.

Every field of a row (SFT: ``prompt``, ``completion``; DPO: ``prompt``, ``chosen``, ``rejected``; a
field is its messages' contents joined) is compared with every evaluation item
(:class:`EvalItem`: tagging questions of the evaluation split, KGC sentences that can be drawn,
tutoring held-out prompts, and the extra files of ``make_datasets.contamination.extra``). The
overlap of an item with a field is the share of the item's n-grams found in the field; at
``threshold`` or more it is a match ``(row, field, item, overlap)``. Space-separated text is
compared in word n-grams, CJK text in character n-grams (:mod:`pipelines.training.text_ngrams`):
an item of at least ``n`` units uses ``n``-grams, a shorter one ``short_n``-grams, one shorter than
that is one n-gram of its whole text, and one below ``min_units`` is not checked (counted as
``too_short``). The defaults and why are in ``docs/decontamination.md``.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from pipelines.config import StrictModel
from pipelines.io import iter_jsonl_objects
from pipelines.stage import StageError
from pipelines.training.rows import REQUIRED_COLUMNS
from pipelines.training.text_ngrams import chars, is_cjk, ngrams, words

SYSTEMS = ("tagging", "kgc", "tutoring")


class ExtraEvaluationFile(StrictModel):
    """A user-listed evaluation file: JSON lines or CSV (``.csv``/``.tsv``) with a text column."""

    path: str = Field(description="JSON lines or CSV/TSV file of evaluation items")
    text_field: str = Field("text", description="field or column holding each item's text")
    id_field: str | None = Field(
        None,
        description="field or column naming each item (null: the line number)",
    )  # null = the line number
    name: str | None = Field(
        None,
        description="the item set's name in contamination.jsonl (null: the file name)",
    )  # the item set's name in contamination.jsonl (default: the file name)


class UnitsConfig(StrictModel):
    n: int = Field(ge=1, description="n-gram length (words, or characters for Chinese) of items with at least n units")
    short_n: int = Field(ge=1, description="n-gram length of shorter items (items under short_n units: the whole item)")
    min_units: int = Field(ge=1, description="items with fewer units are not checked (too short to match meaningfully)")

    @model_validator(mode="after")
    def _ordered(self) -> UnitsConfig:
        if not self.min_units <= self.short_n <= self.n:
            raise ValueError(f"need min_units <= short_n <= n, got {self.min_units}, {self.short_n}, {self.n}")
        return self


class ContaminationConfig(StrictModel):
    enabled: bool = Field(True, description="false: no check (the metrics say items_checked {})")
    action: Literal["drop", "flag"] = Field(
        "drop",
        description="drop | flag (keep, with meta.contamination); both list the matches in the output file",
    )
    threshold: float = Field(
        default=0.5, gt=0.0, le=1.0,
        description="a match: at least this share of an item's n-grams inside one field (prompt, completion, "
        "chosen, rejected)",
    )
    words: UnitsConfig = Field(
        default_factory=lambda: UnitsConfig(n=13, short_n=8, min_units=5),
        description="space-separated text, in words: n-grams; items under n words short_n-grams (under short_n: "
        "the whole item); under min_units not checked",
    )
    chars: UnitsConfig = Field(
        default_factory=lambda: UnitsConfig(n=20, short_n=12, min_units=8),
        description="Chinese text, in characters (20 characters ~ 13 words): as words",
    )
    systems: list[Literal["tagging", "kgc", "tutoring"]] = Field(
        default_factory=lambda: list(SYSTEMS),
        description="evaluation sets checked: tagging's evaluation split, KGC's drawable sentences, tutoring's "
        "held-out DPO prompts",
    )
    extra: list[ExtraEvaluationFile] = Field(
        default_factory=list,
        description="more evaluation files (JSONL or CSV), e.g. [{path: "
        "../shared/data/tutoring/mathdial_test.jsonl, text_field: question, id_field: qid}]",
    )
    output: str | None = Field(
        None,
        description="one line per match; null = <output_dir>/contamination.jsonl",
    )  # null = <make_datasets.output_dir>/contamination.jsonl


@dataclass(frozen=True)
class EvalItem:
    """One evaluation item: its set (``tagging``, ``kgc``, ``tutoring`` or an extra file's name), id and text."""

    set: str
    id: str
    text: str


class EvaluationFileError(StageError):
    """An extra evaluation file that cannot be read (the message names the file and line)."""


def _item(name: str, number: int, row: dict[str, Any], spec: ExtraEvaluationFile) -> EvalItem:
    text = row.get(spec.text_field)
    if not isinstance(text, str) or not text.strip():
        got = "missing" if spec.text_field not in row else f"{type(text).__name__} {str(text)[:40]!r}"
        raise EvaluationFileError(
            f"{spec.path}:{number}: field {spec.text_field!r} is {got}, not text; fix the line or set "
            f"make_datasets.contamination.extra[].text_field (columns here: {sorted(row)[:8]})"
        )
    row_id = row.get(spec.id_field) if spec.id_field else None
    return EvalItem(name, str(row_id if row_id not in (None, "") else number), text)


def read_extra_file(spec: ExtraEvaluationFile, root: Path | str = ".") -> list[EvalItem]:
    """The items of one extra evaluation file; a missing file or a bad line raises :class:`EvaluationFileError`."""
    path = Path(root) / spec.path
    name = spec.name or Path(spec.path).name
    if not path.is_file():
        raise EvaluationFileError(
            f"{spec.path}: extra evaluation file not found; fix make_datasets.contamination.extra"
        )
    with open(path, encoding="utf-8", newline="") as handle:
        if path.suffix.lower() in (".csv", ".tsv"):
            reader = csv.DictReader(handle, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
            return [_item(name, reader.line_num, row, spec) for row in reader]
        return [
            _item(name, n, row, spec) for n, row in iter_jsonl_objects(handle, spec.path, error=EvaluationFileError)
        ]


def field_texts(row: dict[str, Any], kind: str) -> dict[str, str]:
    """``{field: text}`` of a normalised row: each column's message contents joined by newlines."""
    return {column: "\n".join(m["content"] for m in row[column]) for column in REQUIRED_COLUMNS[kind]}


class ContaminationIndex:
    """The evaluation items' n-grams, looked up field by field."""

    def __init__(self, items: list[EvalItem], cfg: ContaminationConfig):
        self.cfg = cfg
        self.items: list[EvalItem] = []
        self.sizes: list[int] = []
        self.too_short: Counter[str] = Counter()
        self.index: dict[tuple[str, int], dict[tuple[str, ...], list[int]]] = defaultdict(lambda: defaultdict(list))
        for item in dict.fromkeys(items):
            mode = "chars" if is_cjk(item.text) else "words"
            spec: UnitsConfig = getattr(cfg, mode)
            tokens = chars(item.text) if mode == "chars" else words(item.text)
            if len(tokens) < spec.min_units:
                self.too_short[item.set] += 1
                continue
            n = spec.n if len(tokens) >= spec.n else spec.short_n if len(tokens) >= spec.short_n else len(tokens)
            grams = ngrams(tokens, n)
            number = len(self.items)
            self.items.append(item)
            self.sizes.append(len(grams))
            for gram in grams:
                self.index[(mode, n)][gram].append(number)

    def overlaps(self, text: str) -> dict[int, float]:
        """``{item number: overlap}`` of the items at or above the threshold inside ``text``."""
        hits: Counter[int] = Counter()
        tokens = {"words": words(text), "chars": chars(text)}
        for (mode, n), grams in self.index.items():
            for gram in ngrams(tokens[mode], n) if len(tokens[mode]) >= n else ():
                for number in grams.get(gram, ()):
                    hits[number] += 1
        shares = {number: count / self.sizes[number] for number, count in hits.items()}
        return {number: share for number, share in shares.items() if share >= self.cfg.threshold}


def decontaminate(
    rows: list[dict[str, Any]], kind: str, *, index: ContaminationIndex, action: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(rows kept, match records)``: a row with a match is dropped, or kept with
    ``meta.contamination`` (the matched items) when ``action`` is ``flag``."""
    kept, matches = [], []
    for row in rows:
        found = []
        for field, text in field_texts(row, kind).items():
            for number, overlap in sorted(index.overlaps(text).items()):
                item = index.items[number]
                found.append({"field": field, "item_set": item.set, "item_id": item.id, "overlap": round(overlap, 4)})
        if not found:
            kept.append(row)
            continue
        matches += [
            {"kind": kind, "row_id": row["id"], "source": row["source"], **match, "action": action} for match in found
        ]
        if action == "flag":
            meta = json.loads(row["meta"] or "{}") | {"contamination": found}
            kept.append(row | {"meta": json.dumps(meta, ensure_ascii=False, sort_keys=True)})
    return kept, matches
