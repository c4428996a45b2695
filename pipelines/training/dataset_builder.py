"""``make_datasets``: merge, clean and split generated SFT and DPO rows into datasets on disk.

Inputs: the JSONL files listed in :class:`MakeDatasetsConfig.inputs` (shared SFT/DPO formats) and,
per kind, the target it is built for (:mod:`pipelines.training.dataset_targets`: the model, family and
``max_length`` of the train section it feeds). Steps per kind: validate rows (bad rows are counted and
written to ``rejected.jsonl``, never fatal), deduplicate on normalised content, drop rows longer than
the target's ``max_length`` tokens as rendered by the target model's chat template, split train/eval
with a seeded hash ranking (stable as data grows). The data card records each kind's target and its
tokenizer's fingerprint (``targets``); ``train`` refuses a dataset filtered with another tokenizer
than its model's. Outputs:
``<output_dir>/{sft,dpo}`` (``datasets`` DatasetDict with ``train`` and ``eval``) and a data card
(``data_card.json`` + ``DATA_CARD.md``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from pipelines.config import StrictModel
from pipelines.io import apply_umask_modes, atomic_open, read_jsonl, write_json_atomic, write_jsonl_atomic
from pipelines.models.chat_encoding import install_remote_code_shims, tokenizer_fingerprint
from pipelines.training.cards import render_data_card
from pipelines.training.dataset_card import FILTERS, render_card
from pipelines.training.dataset_card import measure as card_facts
from pipelines.training.dataset_filters import RowFilters, example
from pipelines.training.dataset_targets import DatasetTarget
from pipelines.training.decontamination import ContaminationConfig, EvalItem
from pipelines.training.families import (
    chat_token_ids,
    detect_family,
    model_stop_ids,
    prepare_tokenizer,
    read_model_type,
)
from pipelines.training.near_duplicates import NearDuplicateConfig
from pipelines.training.rows import KINDS, RowError, content_key, conversations, is_demo, normalise_row, prompt_key

log = logging.getLogger(__name__)


class DatasetInput(StrictModel):
    """One input file: its path, whether it holds SFT or DPO rows, and whether it must exist."""

    path: str = Field(description="JSONL file of rows (generate stages' sft.jsonl or dpo.jsonl)")
    kind: Literal["sft", "dpo"] = Field(
        description="sft: (prompt, completion) rows | dpo: (prompt, chosen, rejected) rows",
    )
    required: bool = Field(
        False,
        description="true: a missing file is an error; false: it is listed in the data card as missing",
    )


# Keys of the single-tokenizer layout: each now comes from the train section the dataset feeds.
MOVED_KEYS = {"tokenizer": "model", "family": "family", "max_length": "max_length"}


class MakeDatasetsConfig(StrictModel):
    inputs: list[DatasetInput] = Field(
        min_length=1,
        description="JSONL files merged into the datasets; a missing optional file is listed in the data card, at "
        "least one must exist",
    )
    output_dir: str = Field(
        "data/train",
        description="writes <output_dir>/sft, <output_dir>/dpo (HF datasets, splits train/eval), data_card.json, "
        "DATA_CARD.md",
    )
    # the train section each dataset is built for: its model's tokenizer, family and max_length measure the rows
    targets: dict[Literal["sft", "dpo"], str] = Field(
        default_factory=lambda: {"sft": "train.sft", "dpo": "train.dpo"},
        description="the run each dataset feeds: rows are measured with its model's tokenizer and chat template "
        "(family) and dropped above its max_length",
    )
    eval_fraction: float = Field(
        default=0.1, ge=0.0, le=0.5,
        description="share of rows (after dedup/filter) held out for eval, per dataset",
    )
    min_eval_rows: int = Field(
        default=1, ge=0,
        description="at least this many eval rows when a dataset has >= 2 rows and eval_fraction > 0",
    )
    seed: int = Field(
        13,
        description="split seed (rows are ranked by sha256(seed:content); same data + seed = same split)",
    )
    deduplicate: bool = Field(
        True,
        description="drop rows whose conversation repeats an earlier one (case/whitespace-insensitive)",
    )
    near_duplicates: NearDuplicateConfig = Field(
        default_factory=NearDuplicateConfig,
        description="MinHash LSH over each dataset's rows after the exact dedup; the first row read of a group is "
        "kept (docs/decontamination.md)",
    )
    contamination: ContaminationConfig = Field(
        default_factory=ContaminationConfig,
        description="drop training rows that carry an evaluation item (docs/decontamination.md)",
    )
    reports_dir: str = Field(
        "reports/make_datasets",
        description="metrics.json and rejected.jsonl (invalid / too long rows with the reason)",
    )

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        moved = [key for key in MOVED_KEYS if isinstance(data, dict) and key in data]
        if moved:
            where = ", ".join(f"make_datasets.{key} -> train.<method>.{MOVED_KEYS[key]}" for key in moved)
            raise ValueError(
                f"{', '.join(moved)} moved to the train sections ({where}): each dataset is measured with the "
                "model, family and max_length of the run it feeds (make_datasets.targets); remove them here and "
                "set the train section, or lay a preset over it (python -m pipelines.profiles "
                "configs/training/<preset>.yaml --write params.yaml)"
            )
        return data

    @model_validator(mode="after")
    def _every_kind(self) -> MakeDatasetsConfig:
        if missing := [kind for kind in KINDS if kind not in self.targets]:
            raise ValueError(f"make_datasets.targets lacks {missing}; name each one's train section (sft: train.sft)")
        return self


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def rows_sha256(rows: list[dict[str, Any]]) -> str:
    """Content hash of a split: SHA-256 over its rows as canonical JSON lines, in order."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
    return digest.hexdigest()


def split_rows(rows: list[dict[str, Any]], keys: list[str], cfg: MakeDatasetsConfig) -> tuple[list, list]:
    """Rank rows by ``sha256(seed:key)``; the first ``eval_fraction`` (at least ``min_eval_rows``) are eval.

    Rows sharing a key (the same prompt) always land on the same side, so no eval prompt is trained on.
    """
    rank = {key: hashlib.sha256(f"{cfg.seed}:{key}".encode()).hexdigest() for key in keys}
    order = sorted(range(len(rows)), key=lambda i: (rank[keys[i]], i))
    n_eval = 0
    if len(rows) >= 2 and cfg.eval_fraction > 0:
        n_eval = min(len(rows) - 1, max(cfg.min_eval_rows, math.ceil(cfg.eval_fraction * len(rows))))
    eval_ids: set[int] = set()
    for i in order:  # whole prompt groups, until the eval share is reached
        if len(eval_ids) >= n_eval:
            break
        group = [j for j in order if keys[j] == keys[i]]
        if len(eval_ids) + len(group) >= len(rows):
            break  # never move every row to eval
        eval_ids.update(group)
    train = [rows[i] for i in order if i not in eval_ids]
    evaluation = [rows[i] for i in order if i in eval_ids]
    return train, evaluation


def token_length(tokenizer: Any, row: dict[str, Any], kind: str) -> int:
    """Longest rendered conversation of the row, in tokens of the target model."""
    return max(len(chat_token_ids(tokenizer, conv)) for conv in conversations(row, kind))


def load_tokenizer(path: str, family_name: str = "auto", trust_remote_code: bool | None = None):
    from transformers import AutoTokenizer

    family = detect_family(read_model_type(path), family_name)
    trust = family.trust_remote_code if trust_remote_code is None else trust_remote_code
    install_remote_code_shims()
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
    return prepare_tokenizer(tokenizer, family, stop_ids=model_stop_ids(path)), family


class TargetTokenizers:
    """Each kind's tokenizer, loaded on first use (a kind without rows needs no model folder) and once per model."""

    def __init__(self, targets: Mapping[str, DatasetTarget], given: Mapping[str, Any] | None = None):
        self.targets = targets
        given = given or {}
        self.loaded: dict[str, tuple[Any, str]] = {kind: (tok, targets[kind].family) for kind, tok in given.items()}
        self._by_model: dict[tuple, tuple[Any, str]] = {}

    def get(self, kind: str) -> Any:
        if kind not in self.loaded:
            t = self.targets[kind]
            key = (t.tokenizer, t.family, t.trust_remote_code)
            if key not in self._by_model:
                tokenizer, family = load_tokenizer(t.tokenizer, t.family, t.trust_remote_code)
                self._by_model[key] = (tokenizer, family.name)
            self.loaded[kind] = self._by_model[key]
        return self.loaded[kind][0]

    def text_length(self, kind: str):
        """``text -> its length in tokens`` of ``kind``'s tokenizer (no special tokens)."""
        tokenizer = self.get(kind)
        return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def card_entry(self, kind: str) -> dict[str, Any]:
        """The data card's record of what measured ``kind`` (no fingerprint when nothing was measured)."""
        t = self.targets[kind]
        tokenizer, family = self.loaded.get(kind, (None, t.family))
        fingerprint = tokenizer_fingerprint(tokenizer) if tokenizer is not None else None
        return {"section": t.section, "tokenizer": t.tokenizer, "tokenizer_sha256": fingerprint, "family": family,
                "max_length": t.max_length}  # fmt: skip


def save_dataset_dict(
    splits: dict[str, list[dict[str, Any]]], kind: str, dest: Path, *, card: str | None = None
) -> None:
    """Save the non-empty splits as a ``datasets.DatasetDict`` at ``dest``, replacing it atomically (rename),
    with ``card`` as its ``README.md`` when given.

    A kind without any row gets a folder holding only ``EMPTY.md``.
    """
    from datasets import Dataset, DatasetDict, Features, Value

    message = [{"role": Value("string"), "content": Value("string")}]
    columns = {"id": Value("string"), "source": Value("string"), "prompt": message}
    columns.update({"completion": message} if kind == "sft" else {"chosen": message, "rejected": message})
    columns["meta"] = Value("string")
    features = Features(columns)
    splits = {name: rows for name, rows in splits.items() if rows}  # datasets cannot reload an empty split
    tmp_parent = dest.parent
    tmp_parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=tmp_parent))
    if splits:
        DatasetDict({name: Dataset.from_list(rows, features=features) for name, rows in splits.items()}).save_to_disk(
            str(tmp)
        )
    else:
        (tmp / "EMPTY.md").write_text(f"No usable {kind} rows; see data_card.json for what the inputs held.\n")
    if card is not None:
        (tmp / "README.md").write_text(card, encoding="utf-8")
    apply_umask_modes(tmp)  # mkdtemp makes the folder 0700
    old = dest.with_name(f".{dest.name}.old")
    if dest.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def build_datasets(
    cfg: MakeDatasetsConfig,
    targets: Mapping[str, DatasetTarget],
    *,
    tokenizers: Mapping[str, Any] | None = None,
    eval_items: Sequence[EvalItem] = (),
) -> dict[str, Any]:
    """Run the whole stage for ``targets`` (one per kind; ``tokenizers``: already prepared ones by kind;
    ``eval_items``: the tagging and KGC evaluation items, :mod:`pipelines.training.eval_items`);
    returns the metrics (also the data card's ``counts``)."""
    if missing_targets := [kind for kind in KINDS if kind not in targets]:
        raise ValueError(f"no dataset target for {missing_targets}")
    inputs_present = [item for item in cfg.inputs if Path(item.path).exists()]
    missing = [item for item in cfg.inputs if not Path(item.path).exists()]
    required_missing = [item.path for item in missing if item.required]
    if required_missing:
        raise FileNotFoundError(f"required make_datasets input(s) missing: {required_missing}; generate them first")
    if not inputs_present:
        raise FileNotFoundError(
            "none of the make_datasets inputs exist: " + ", ".join(i.path for i in cfg.inputs) + "; run the generate "
            "stages or list data/demo fixtures in params.yaml make_datasets.inputs"
        )
    for item in missing:
        log.warning("make_datasets: optional input %s is missing; skipped (listed in the data card)", item.path)
    measure = TargetTokenizers(targets, tokenizers)
    filters = RowFilters(cfg.near_duplicates, cfg.contamination, eval_items)

    card_inputs: list[dict[str, Any]] = [
        {"path": item.path, "kind": item.kind, "exists": False, "required": item.required} for item in missing
    ]
    counts: dict[str, Any] = {}
    hashes: dict[str, Any] = {}
    rejected_by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    datasets: dict[str, tuple[dict[str, list], str | None]] = {}
    for kind in sorted(KINDS, key=lambda k: k != "dpo"):  # DPO first: its held-out prompts are the SFT rows' check
        rejected = rejected_by_kind[kind]
        rows, keys, seen, valid, lengths = [], [], set(), [], {}
        removed = Counter()
        for item in (i for i in inputs_present if i.kind == kind):
            path = Path(item.path)
            raw = read_jsonl(path)
            default_source = path.parent.name
            stats = Counter(read=len(raw))
            for number, row in enumerate(raw, start=1):
                try:
                    clean = normalise_row(row, kind, default_source)
                except RowError as exc:
                    stats["invalid"] += 1
                    filters.note(kind, "invalid", example(f"{item.path}:{number}", str(exc)))
                    rejected.append({"file": item.path, "line": number, "reason": str(exc), "row": row})
                    continue
                valid.append(clean)
                key = content_key(clean, kind)
                if cfg.deduplicate and key in seen:
                    stats["duplicates"] += 1
                    filters.note(kind, "duplicates", example(clean["id"], "repeats an earlier row"))
                    continue
                length = token_length(measure.get(kind), clean, kind)
                if length > targets[kind].max_length:
                    stats["too_long"] += 1
                    filters.note(kind, "too_long", example(clean["id"], f"{length} tokens"))
                    rejected.append({"file": item.path, "line": number, "reason": f"{length} tokens > max_length"})
                    continue
                seen.add(key)
                lengths[clean["id"]] = length
                rows.append(clean)
                keys.append(key)
                stats["kept"] += 1
                stats["demo_fixture_rows"] += int(is_demo(clean))
            removed.update({k: stats[k] for k in ("invalid", "duplicates", "too_long")})
            card_inputs.append(
                {"path": item.path, "kind": kind, "exists": True, "required": item.required}
                | {"sha256": file_sha256(path), **{k: stats[k] for k in ("read", "kept", "invalid", "duplicates")}}
                | {"too_long": stats["too_long"], "demo_fixture_rows": stats["demo_fixture_rows"]}
            )
        rows = filters.apply(rows, kind)
        train, evaluation = split_rows(rows, [prompt_key(row) for row in rows], cfg)
        train = filters.tutoring(train, valid) if kind == "dpo" else filters.tutoring_sft(train)
        rows = train + evaluation
        removed.update(filters.removed[kind])
        splits = {"train": train, "eval": evaluation}
        facts = card_facts(splits, kind, tokens=lengths, reply_tokens=measure.text_length(kind)) if rows else None
        hf_card = None if facts is None else render_card(
            kind, facts, removed=removed, examples=filters.examples[kind], target=measure.card_entry(kind),
            token_values=[lengths[r["id"]] for r in rows if r["id"] in lengths],
        )  # fmt: skip
        datasets[kind] = (splits, hf_card)  # saved once every kind has read cleanly: a bad row writes nothing
        counts[kind] = {
            "train": len(train),
            "eval": len(evaluation),
            "by_source": dict(sorted(Counter(r["source"] for r in rows).items())),
            "demo_fixture_rows": sum(is_demo(r) for r in rows),
            "removed": {k: removed[k] for k in FILTERS},
        }
        hashes[kind] = {"train": rows_sha256(train), "eval": rows_sha256(evaluation)}
        if not rows:
            log.warning("make_datasets: no %s rows; %s/%s is empty", kind, cfg.output_dir, kind)
        log.info(
            "make_datasets: %s train=%d eval=%d removed=%s", kind, len(train), len(evaluation), counts[kind]["removed"]
        )

    for kind in KINDS:
        splits, hf_card = datasets[kind]
        save_dataset_dict(splits, kind, Path(cfg.output_dir) / kind, card=hf_card)
    counts, hashes = {kind: counts[kind] for kind in KINDS}, {kind: hashes[kind] for kind in KINDS}  # in KINDS order
    card_inputs.sort(key=lambda entry: (entry["exists"], KINDS.index(entry["kind"]) if entry["exists"] else 0))
    rejected = [row for kind in KINDS for row in rejected_by_kind[kind]]
    filters.in_kind_order()
    card = {
        "targets": {kind: measure.card_entry(kind) for kind in KINDS},
        "seed": cfg.seed,
        "eval_fraction": cfg.eval_fraction,
        "deduplicate": cfg.deduplicate,
        "inputs": card_inputs,
        "counts": counts,
        "sha256": hashes,
        "contamination": filters.summary(),
    }
    write_json_atomic(Path(cfg.output_dir) / "data_card.json", card)
    with atomic_open(Path(cfg.output_dir) / "DATA_CARD.md") as handle:
        handle.write(render_data_card(card))
    write_jsonl_atomic(Path(cfg.reports_dir) / "rejected.jsonl", rejected + filters.rejected)
    write_jsonl_atomic(Path(cfg.contamination.output or Path(cfg.output_dir) / "contamination.jsonl"), filters.matches)
    return {"counts": counts, "inputs_missing": [i.path for i in missing], "sha256": hashes,
            "contamination": card["contamination"]}  # fmt: skip
