"""Human rating as in the RAM2C paper: blind comparison sheets, their key, and import of the
filled sheets into the same judgments the LLM judges produce (so the same scoring and kappa).

Files written by :func:`write_sheets` into one folder:

- ``sheet_<rater>.csv`` per rater: ``rater, row, item_key, dimension, topic, student,
  student_answer, passage, reply_a, reply_b, tie, choice, comment`` (``passage``: the book passage,
  for the dimensions whose criteria need it) with ``choice`` empty (to fill with ``A``,
  ``B`` or ``equal``); a row whose two replies are the same text (a tie, as the LLM judges'
  :func:`~pipelines.evaluation.hts.judging.is_tie`) says so in ``tie`` and comes filled ``equal``.
  Nothing in a sheet says which reply is which system's: the item is named by an
  opaque ``item_key`` (one per comparison and prompt), and positions are balanced per rater,
  comparison and dimension (half the items with the system's reply first, in the rater's own
  seeded order, as the LLM judges get them).
- ``key.csv`` (``rater, item_key, dimension, comparison, item_id, system_position``): keep it
  from the raters.

Items come per comparison (``{comparison: [HTSItem]}``; a plain list is one comparison named
``""``). Each rater gets, per comparison and dimension, all items or a seeded random ``sample`` of
them (the paper gave each volunteer 25 per dimension), in a seeded order. :func:`read_ratings`
reads filled sheets, or the CSV the HTML form saves (same columns; the texts may be absent), with
the key.
"""

from __future__ import annotations

import csv
import hashlib
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.agents import ParseError
from pipelines.evaluation.hts.agents.pairwise_judge import normalise_choice
from pipelines.evaluation.hts.judging import (
    DIMENSIONS,
    HTSItem,
    Judgment,
    arranged,
    balanced_positions,
    is_tie,
    outcome_of,
)
from pipelines.io import atomic_open

SHEET_COLUMNS = (
    "rater",
    "row",
    "item_key",
    "dimension",
    "topic",
    "student",
    "student_answer",
    "passage",
    "reply_a",
    "reply_b",
    "tie",
    "choice",
    "comment",
)
KEY_COLUMNS = ("rater", "item_key", "dimension", "comparison", "item_id", "system_position")
HUMAN_SALT = "human"
TIE_NOTE = "identical replies: filled in as equal, nothing to rate"
PASSAGE_DIMENSIONS = ("teaching",)  # criterion 2.10, factual errors: the rater needs the book passage
STUDENT_TEXT = {
    "en": "{grade}, {traits}, likes {interest}, {reading_level}",
    "zh": "{grade}学生，{traits}，喜欢{interest}，{reading_level}",
}


def item_key(comparison: str, item_id: str, seed: int) -> str:
    """An opaque, stable name of one comparison's item for the raters (reveals neither id nor position)."""
    return "k" + hashlib.sha256(f"{seed}:{HUMAN_SALT}:key:{comparison}:{item_id}".encode()).hexdigest()[:10]


def rater_slug(rater: str) -> str:
    slug = re.sub(r"[^\w-]+", "_", rater.strip()).strip("_")
    if not slug:
        raise ValueError(f"rater name {rater!r} has no usable characters")
    return slug


def student_text(student: Mapping[str, Any] | None, language: str) -> str:
    """The student's profile in one line (what the judges see), '' when not recorded."""
    if not student:
        return ""
    joiner = "、" if language == "zh" else " and "
    return STUDENT_TEXT.get(language, STUDENT_TEXT["en"]).format(
        **{**student, "traits": joiner.join(student["traits"])}
    )


def by_comparison(items: Sequence[HTSItem] | Mapping[str, Sequence[HTSItem]]) -> dict[str, list[HTSItem]]:
    """Items per comparison (a plain list is the one comparison ``""``); ValueError on repeated ids."""
    grouped = {"": list(items)} if not isinstance(items, Mapping) else {k: list(v) for k, v in items.items()}
    for comparison, values in grouped.items():
        ids = [i.id for i in values]
        if len(set(ids)) != len(ids):
            raise ValueError(f"item ids must be distinct within a comparison ({comparison or 'the items'})")
    return grouped


def sheet_rows(
    items: Sequence[HTSItem] | Mapping[str, Sequence[HTSItem]],
    rater: str,
    *,
    dimensions: Sequence[str] = DIMENSIONS,
    seed: int = 0,
    sample: int | None = None,
    passages: Mapping[str, str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """``(rows, key rows)`` of one rater's blind sheet (``choice`` and ``comment`` empty; ``equal``
    for a tie)."""
    rows: list[dict[str, Any]] = []
    key: list[dict[str, str]] = []
    for dimension in dimensions:
        chosen: list[tuple[str, HTSItem, str]] = []
        for comparison, values in by_comparison(items).items():
            rng = random.Random(f"{seed}:{rater}:{comparison}:{dimension}")
            picked = rng.sample(values, sample) if sample is not None and sample < len(values) else list(values)
            salt = f"{HUMAN_SALT}:{comparison}:{rater}:{dimension}"
            positions = balanced_positions([i.id for i in picked], seed=seed, salt=salt)
            chosen += [(comparison, i, positions[i.id]) for i in picked]
        random.Random(f"{seed}:{rater}:{dimension}:order").shuffle(chosen)
        for comparison, item, position in chosen:
            reply_a, reply_b = arranged(item, position)
            ident = item_key(comparison, item.id, seed)
            tie = is_tie(item)
            rows.append(
                {
                    "rater": rater,
                    "row": len(rows) + 1,
                    "item_key": ident,
                    "dimension": dimension,
                    "topic": item.topic,
                    "student": student_text(item.student, item.language),
                    "student_answer": item.student_answer,
                    "passage": (passages or {}).get(item.id, "") if dimension in PASSAGE_DIMENSIONS else "",
                    "reply_a": reply_a,
                    "reply_b": reply_b,
                    "tie": TIE_NOTE if tie else "",
                    "choice": "equal" if tie else "",
                    "comment": "",
                }
            )
            key.append(
                {
                    "rater": rater,
                    "item_key": ident,
                    "dimension": dimension,
                    "comparison": comparison,
                    "item_id": item.id,
                    "system_position": position,
                }
            )
    return rows, key


def write_csv(path: Path | str, rows: Iterable[dict[str, Any]], columns: Sequence[str], *, bom: bool = True) -> None:
    """UTF-8 CSV, atomically; with a BOM by default (spreadsheet programs then read Chinese right)."""
    with atomic_open(path, encoding="utf-8-sig" if bom else "utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def write_sheets(
    folder: Path | str,
    items: Sequence[HTSItem] | Mapping[str, Sequence[HTSItem]],
    raters: Sequence[str],
    *,
    dimensions: Sequence[str] = DIMENSIONS,
    seed: int = 0,
    sample: int | None = None,
    passages: Mapping[str, str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Write ``sheet_<rater>.csv`` per rater and ``key.csv``; returns the rows per rater (for the form).
    ``passages`` (``{item id: book passage}``) fills the ``passage`` of the dimensions whose criteria
    need it (:data:`PASSAGE_DIMENSIONS`: factual errors)."""
    if len({rater_slug(r) for r in raters}) != len(raters):
        raise ValueError(f"rater names must be distinct, got {list(raters)}")
    by_comparison(items)
    folder = Path(folder)
    sheets, key = {}, []
    for rater in raters:
        sheets[rater], rater_key = sheet_rows(
            items, rater, dimensions=dimensions, seed=seed, sample=sample, passages=passages
        )
        key += rater_key
        write_csv(folder / f"sheet_{rater_slug(rater)}.csv", sheets[rater], SHEET_COLUMNS)
    write_csv(folder / "key.csv", key, KEY_COLUMNS)
    return sheets


def read_csv(path: Path | str) -> list[dict[str, str]]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def read_ratings(paths: Iterable[Path | str], key_path: Path | str) -> tuple[dict[str, list[Judgment]], list[str]]:
    """Filled sheets (or form CSVs) -> ``({comparison: judgments}, problems)``.

    Every row becomes a :class:`Judgment` with ``judge`` = the rater; an empty or unreadable
    ``choice`` gives ``outcome=None`` (unscored, counted as failed). Rows whose (rater, item key,
    dimension) the key does not hold, or repeating one, are skipped and listed in ``problems``
    (``"<file>:<line>: ..."``). A file without the needed columns raises ValueError.
    """
    key = {(r["rater"], r["item_key"], r["dimension"]): r for r in read_csv(key_path)}
    judgments: dict[str, list[Judgment]] = {}
    problems: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for path in paths:
        rows = read_csv(path)
        needed = {"rater", "item_key", "dimension", "choice"}
        if rows and not needed <= set(rows[0]):
            raise ValueError(f"{path}: needs columns {sorted(needed)}, has {sorted(rows[0])}")
        for line, row in enumerate(rows, start=2):
            where = f"{Path(path).name}:{line}"
            ident = (row["rater"], row["item_key"], row["dimension"])
            entry = key.get(ident)
            if entry is None:
                problems.append(
                    f"{where}: the key has no item {row['item_key']!r} / {row['dimension']!r} "
                    f"for rater {row['rater']!r}"
                )
                continue
            if ident in seen:
                problems.append(f"{where}: {row['rater']} rated {row['item_key']} / {row['dimension']} twice")
                continue
            seen.add(ident)
            position = entry["system_position"]
            raw = (row.get("choice") or "").strip()
            try:
                choice, error = (normalise_choice(raw), None) if raw else (None, "not rated")
            except ParseError as exc:
                choice, error = None, str(exc)
            outcome = outcome_of(choice, position) if choice else None
            judgment = Judgment(
                entry["item_id"], row["dimension"], row["rater"], position, choice, outcome, choice is not None, error
            )
            judgments.setdefault(entry["comparison"], []).append(judgment)
    return judgments, problems
