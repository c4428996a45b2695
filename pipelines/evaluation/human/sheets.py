"""Human rating as in the RAM2C paper: blind comparison sheets, their key, and import of the
filled sheets into the same judgments the LLM judges produce (so the same scoring and kappa).

Files written by :func:`write_sheets` into one folder:

- ``sheet_<rater>.csv`` per rater: ``rater, row, item_key, dimension, topic, student_answer,
  reply_a, reply_b, choice, comment`` with ``choice`` empty (to fill with ``A``, ``B`` or
  ``equal``). Nothing in a sheet says which reply is the tuned model's: the item is named by an
  opaque ``item_key`` and positions are randomised per item (seeded, like the LLM judges').
- ``key.csv`` (``item_key, item_id, tuned_position``): keep it from the raters.

Each rater gets, per dimension, all items or a seeded random ``sample`` of them (the paper gave
each volunteer 25 per dimension), in a seeded order. :func:`read_ratings` reads filled sheets, or
the CSV the HTML form saves (same columns; the texts may be absent), with the key.
"""

from __future__ import annotations

import csv
import hashlib
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pipelines.agents import ParseError
from pipelines.evaluation.hts.agents.pairwise_judge import normalise_choice
from pipelines.evaluation.hts.judging import DIMENSIONS, HTSItem, Judgment, arranged, outcome_of, tuned_position
from pipelines.io import atomic_open

SHEET_COLUMNS = (
    "rater",
    "row",
    "item_key",
    "dimension",
    "topic",
    "student_answer",
    "reply_a",
    "reply_b",
    "choice",
    "comment",
)
KEY_COLUMNS = ("item_key", "item_id", "tuned_position")
HUMAN_SALT = "human"


def item_key(item_id: str, seed: int) -> str:
    """An opaque, stable name of an item for the raters (reveals neither id nor position)."""
    return "k" + hashlib.sha256(f"{seed}:{HUMAN_SALT}:key:{item_id}".encode()).hexdigest()[:10]


def rater_slug(rater: str) -> str:
    slug = re.sub(r"[^\w-]+", "_", rater.strip()).strip("_")
    if not slug:
        raise ValueError(f"rater name {rater!r} has no usable characters")
    return slug


def sheet_rows(
    items: Sequence[HTSItem],
    rater: str,
    *,
    dimensions: Sequence[str] = DIMENSIONS,
    seed: int = 0,
    sample: int | None = None,
) -> list[dict[str, Any]]:
    """The blind rows of one rater's sheet (``choice`` and ``comment`` empty)."""
    rows: list[dict[str, Any]] = []
    for dimension in dimensions:
        chosen = list(items)
        rng = random.Random(f"{seed}:{rater}:{dimension}")
        if sample is not None and sample < len(chosen):
            chosen = rng.sample(chosen, sample)
        else:
            rng.shuffle(chosen)
        for item in chosen:
            reply_a, reply_b = arranged(item, tuned_position(item.id, seed, salt=HUMAN_SALT))
            rows.append(
                {
                    "rater": rater,
                    "row": len(rows) + 1,
                    "item_key": item_key(item.id, seed),
                    "dimension": dimension,
                    "topic": item.topic,
                    "student_answer": item.student_answer,
                    "reply_a": reply_a,
                    "reply_b": reply_b,
                    "choice": "",
                    "comment": "",
                }
            )
    return rows


def key_rows(items: Iterable[HTSItem], *, seed: int = 0) -> list[dict[str, str]]:
    """The key of the blind sheets: which item a key names and where its tuned reply is."""
    rows = []
    for i in items:
        position = tuned_position(i.id, seed, salt=HUMAN_SALT)
        rows.append({"item_key": item_key(i.id, seed), "item_id": i.id, "tuned_position": position})
    return rows


def write_csv(path: Path | str, rows: Iterable[dict[str, Any]], columns: Sequence[str], *, bom: bool = True) -> None:
    """UTF-8 CSV, atomically; with a BOM by default (spreadsheet programs then read Chinese right)."""
    with atomic_open(path, encoding="utf-8-sig" if bom else "utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def write_sheets(
    folder: Path | str,
    items: Sequence[HTSItem],
    raters: Sequence[str],
    *,
    dimensions: Sequence[str] = DIMENSIONS,
    seed: int = 0,
    sample: int | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Write ``sheet_<rater>.csv`` per rater and ``key.csv``; returns the rows per rater (for the form)."""
    if len({rater_slug(r) for r in raters}) != len(raters):
        raise ValueError(f"rater names must be distinct, got {list(raters)}")
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise ValueError("item ids must be distinct")
    folder = Path(folder)
    sheets = {r: sheet_rows(items, r, dimensions=dimensions, seed=seed, sample=sample) for r in raters}
    for rater, rows in sheets.items():
        write_csv(folder / f"sheet_{rater_slug(rater)}.csv", rows, SHEET_COLUMNS)
    write_csv(folder / "key.csv", key_rows(items, seed=seed), KEY_COLUMNS)
    return sheets


def read_csv(path: Path | str) -> list[dict[str, str]]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def read_ratings(paths: Iterable[Path | str], key_path: Path | str) -> tuple[list[Judgment], list[str]]:
    """Filled sheets (or form CSVs) -> ``(judgments, problems)``.

    Every row becomes a :class:`Judgment` with ``judge`` = the rater; an empty or unreadable
    ``choice`` gives ``outcome=None`` (unscored, counted as failed). Rows naming an unknown item
    key or dimension, or repeating one (rater, item, dimension), are skipped and listed in
    ``problems`` (``"<file>:<line>: ..."``). A file without the needed columns raises ValueError.
    """
    key = {row["item_key"]: row for row in read_csv(key_path)}
    judgments: list[Judgment] = []
    problems: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for path in paths:
        rows = read_csv(path)
        needed = {"rater", "item_key", "dimension", "choice"}
        if rows and not needed <= set(rows[0]):
            raise ValueError(f"{path}: needs columns {sorted(needed)}, has {sorted(rows[0])}")
        for line, row in enumerate(rows, start=2):
            where = f"{Path(path).name}:{line}"
            entry = key.get(row["item_key"])
            if entry is None:
                problems.append(f"{where}: unknown item key {row['item_key']!r}")
                continue
            if row["dimension"] not in DIMENSIONS:
                problems.append(f"{where}: unknown dimension {row['dimension']!r}")
                continue
            ident = (row["rater"], entry["item_id"], row["dimension"])
            if ident in seen:
                problems.append(f"{where}: {row['rater']} rated {row['item_key']} / {row['dimension']} twice")
                continue
            seen.add(ident)
            position = entry["tuned_position"]
            raw = (row.get("choice") or "").strip()
            try:
                choice, error = (normalise_choice(raw), None) if raw else (None, "not rated")
            except ParseError as exc:
                choice, error = None, str(exc)
            outcome = outcome_of(choice, position) if choice else None
            rated = choice is not None
            judgments.append(
                Judgment(entry["item_id"], row["dimension"], row["rater"], position, choice, outcome, rated, error)
            )
    return judgments, problems
