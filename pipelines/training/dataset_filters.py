"""The filters ``make_datasets`` runs after validation, exact deduplication and the length filter:
near duplicates (:mod:`pipelines.training.near_duplicates`) and decontamination against the
evaluation items (:mod:`pipelines.training.decontamination`), with what each removed.

Tutoring items are the prompts ``evaluate`` holds out: the last user message of every valid DPO
input row whose prompt is not in the train split (the eval split, and generated pairs whose prompt
was not kept); the DPO train split is checked against them once it is known.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipelines.training.decontamination import (
    ContaminationConfig,
    ContaminationIndex,
    EvalItem,
    decontaminate,
    read_extra_file,
)
from pipelines.training.near_duplicates import NearDuplicateConfig, near_duplicates
from pipelines.training.rows import KINDS, prompt_key


def example(row_id: str, detail: str) -> str:
    """One short example for the card (no table-breaking characters)."""
    text = f"{row_id}: {detail}".replace("|", "/").replace("`", "'").replace("\n", " ")
    return text if len(text) <= 100 else text[:99] + "…"


class RowFilters:
    """Near duplicates and contamination for one run; keeps the records of what they removed."""

    def __init__(
        self, near: NearDuplicateConfig, contamination: ContaminationConfig, items: Iterable[EvalItem] = (),
        *, root: Path | str = ".",
    ):  # fmt: skip
        self.near, self.cfg = near, contamination
        extra = [item for spec in contamination.extra for item in read_extra_file(spec, root)]
        self.items = [i for i in items if i.set in contamination.systems] + extra if contamination.enabled else []
        self.index = ContaminationIndex(self.items, contamination)
        self.matches: list[dict[str, Any]] = []
        self.rejected: list[dict[str, Any]] = []
        self.examples: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.removed: dict[str, Counter] = defaultdict(Counter)
        self.tutoring_items = 0
        self.tutoring_index: ContaminationIndex | None = None  # the held-out tutoring prompts, once the DPO rows split

    def note(self, kind: str, name: str, text: str, *, keep: int = 3) -> None:
        """Remember up to ``keep`` examples of rows the filter ``name`` removed."""
        if len(self.examples[kind][name]) < keep:
            self.examples[kind][name].append(text)

    def _contamination(self, rows: list[dict[str, Any]], kind: str, index: ContaminationIndex) -> list[dict]:
        kept, matches = decontaminate(rows, kind, index=index, action=self.cfg.action)
        self.matches += matches
        ids = list(dict.fromkeys(m["row_id"] for m in matches))
        if self.cfg.action == "drop":
            self.removed[kind]["contaminated"] += len(rows) - len(kept)
            self.rejected += [{"kind": kind, "id": i, "reason": "contaminated (see contamination.jsonl)"} for i in ids]
        self.examples[kind]["contaminated"] += [
            example(m["row_id"], f"{m['field']} holds {m['item_set']} item {m['item_id']} ({m['overlap']:.0%})")
            for m in matches[:3]
        ]
        return kept

    def apply(self, rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
        """Rows left after near-duplicate removal and decontamination (or flagging)."""
        if self.near.enabled and rows:
            kept, dropped = near_duplicates(rows, kind, self.near)
            rows = [rows[i] for i in kept]
            self.removed[kind]["near_duplicates"] += len(dropped)
            self.rejected += [{"kind": kind, **d, "reason": "near duplicate of the kept row"} for d in dropped]
            self.examples[kind]["near_duplicates"] += [
                example(d["id"], f"Jaccard {d['jaccard']} with {d['kept']}") for d in dropped[:3]
            ]
        return self._contamination(rows, kind, self.index) if self.index.items else rows

    def tutoring(self, train: list[dict[str, Any]], valid: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The DPO train split less rows holding a held-out tutoring prompt (the DPO prompts not
        trained on, which ``evaluate`` asks); the prompts are kept for :meth:`tutoring_sft`."""
        if not (self.cfg.enabled and "tutoring" in self.cfg.systems):
            return train
        trained = {prompt_key(row) for row in train}
        held_out = [row for row in valid if prompt_key(row) not in trained]
        items = [EvalItem("tutoring", row["id"], row["prompt"][-1]["content"]) for row in held_out]
        self.tutoring_index = ContaminationIndex(items, self.cfg)
        self.tutoring_items = len(self.tutoring_index.items)
        return self._contamination(train, "dpo", self.tutoring_index) if self.tutoring_index.items else train

    def tutoring_sft(self, train: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The SFT train split less rows holding a held-out tutoring prompt (e.g. generate_ram2c's
        ``sft.jsonl``, the chosen replies of the same prompts); call after :meth:`tutoring`."""
        index = self.tutoring_index
        return self._contamination(train, "sft", index) if index is not None and index.items else train

    def in_kind_order(self) -> None:
        """Matches and rejected rows of the SFT rows before the DPO rows' (the order the outputs list
        them in), each kind's in the order found."""
        rank = {kind: index for index, kind in enumerate(KINDS)}
        self.matches.sort(key=lambda match: rank[match["kind"]])
        self.rejected.sort(key=lambda row: rank[row["kind"]])

    def summary(self) -> dict[str, Any]:
        """The metrics' ``contamination`` block."""
        by_set = Counter(m["item_set"] for m in self.matches)
        sets = Counter(i.set for i in self.index.items)
        if self.tutoring_items:
            sets["tutoring"] = self.tutoring_items
        return {
            "action": self.cfg.action,
            "matches": len(self.matches),
            "rows": len({(m["kind"], m["row_id"]) for m in self.matches}),
            "by_item_set": dict(sorted(by_set.items())),
            "items_checked": dict(sorted(sets.items())),
            "items_too_short": dict(sorted(self.index.too_short.items())),
        }
