"""``make_datasets``: merge, clean and split generated SFT and DPO rows into datasets on disk.

Inputs: the JSONL files listed in :class:`MakeDatasetsConfig.inputs` (shared SFT/DPO formats) and
the target model's tokenizer. Steps per kind: validate rows (bad rows are counted and written to
``rejected.jsonl``, never fatal), deduplicate on normalised content, drop rows longer than
``max_length`` tokens as rendered by the target model's chat template, split train/eval with a
seeded hash ranking (stable as data grows). The data card records the tokenizer's fingerprint;
``train`` refuses a dataset filtered with another tokenizer than its model's. Outputs:
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
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pipelines.config import StrictModel
from pipelines.io import atomic_open, read_jsonl, write_json_atomic, write_jsonl_atomic
from pipelines.training.cards import render_data_card
from pipelines.training.chat_encoding import install_remote_code_shims, tokenizer_fingerprint
from pipelines.training.families import (
    chat_token_ids,
    detect_family,
    model_stop_ids,
    prepare_tokenizer,
    read_model_type,
)
from pipelines.training.rows import KINDS, RowError, content_key, conversations, is_demo, normalise_row, prompt_key

log = logging.getLogger(__name__)


class DatasetInput(StrictModel):
    """One input file: its path, whether it holds SFT or DPO rows, and whether it must exist."""

    path: str
    kind: Literal["sft", "dpo"]
    required: bool = False


class MakeDatasetsConfig(StrictModel):
    inputs: list[DatasetInput] = Field(min_length=1)
    output_dir: str = "data/train"
    tokenizer: str = "models/base/smollm2-135m-instruct"
    family: str = "auto"
    max_length: int = Field(default=1024, ge=16)
    eval_fraction: float = Field(default=0.1, ge=0.0, le=0.5)
    min_eval_rows: int = Field(default=1, ge=0)
    seed: int = 13
    deduplicate: bool = True
    reports_dir: str = "reports/make_datasets"


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


def load_tokenizer(path: str, family_name: str = "auto"):
    from transformers import AutoTokenizer

    family = detect_family(read_model_type(path), family_name)
    install_remote_code_shims()
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=family.trust_remote_code)
    return prepare_tokenizer(tokenizer, family, stop_ids=model_stop_ids(path)), family


def save_dataset_dict(splits: dict[str, list[dict[str, Any]]], kind: str, dest: Path) -> None:
    """Save the non-empty splits as a ``datasets.DatasetDict`` at ``dest``, replacing it atomically (rename).

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
    old = dest.with_name(f".{dest.name}.old")
    if dest.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def build_datasets(cfg: MakeDatasetsConfig, tokenizer: Any | None = None) -> dict[str, Any]:
    """Run the whole stage; returns the metrics (also the data card's ``counts``)."""
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
    family_name = cfg.family
    if tokenizer is None:
        tokenizer, family = load_tokenizer(cfg.tokenizer, cfg.family)
        family_name = family.name

    card_inputs: list[dict[str, Any]] = [
        {"path": item.path, "kind": item.kind, "exists": False, "required": item.required} for item in missing
    ]
    rejected: list[dict[str, Any]] = []
    counts: dict[str, Any] = {}
    hashes: dict[str, Any] = {}
    for kind in KINDS:
        rows, keys, seen = [], [], set()
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
                    rejected.append({"file": item.path, "line": number, "reason": str(exc), "row": row})
                    continue
                key = content_key(clean, kind)
                if cfg.deduplicate and key in seen:
                    stats["duplicates"] += 1
                    continue
                length = token_length(tokenizer, clean, kind)
                if length > cfg.max_length:
                    stats["too_long"] += 1
                    rejected.append({"file": item.path, "line": number, "reason": f"{length} tokens > max_length"})
                    continue
                seen.add(key)
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
        train, evaluation = split_rows(rows, [prompt_key(row) for row in rows], cfg)
        save_dataset_dict({"train": train, "eval": evaluation}, kind, Path(cfg.output_dir) / kind)
        counts[kind] = {
            "train": len(train),
            "eval": len(evaluation),
            "by_source": dict(sorted(Counter(r["source"] for r in rows).items())),
            "demo_fixture_rows": sum(is_demo(r) for r in rows),
            "removed": {k: removed[k] for k in ("invalid", "duplicates", "too_long")},
        }
        hashes[kind] = {"train": rows_sha256(train), "eval": rows_sha256(evaluation)}
        if not rows:
            log.warning("make_datasets: no %s rows; %s/%s is empty", kind, cfg.output_dir, kind)
        log.info(
            "make_datasets: %s train=%d eval=%d removed=%s", kind, len(train), len(evaluation), counts[kind]["removed"]
        )

    card = {
        "tokenizer": cfg.tokenizer,
        "tokenizer_sha256": tokenizer_fingerprint(tokenizer),
        "family": family_name,
        "max_length": cfg.max_length,
        "seed": cfg.seed,
        "eval_fraction": cfg.eval_fraction,
        "deduplicate": cfg.deduplicate,
        "inputs": card_inputs,
        "counts": counts,
        "sha256": hashes,
    }
    write_json_atomic(Path(cfg.output_dir) / "data_card.json", card)
    with atomic_open(Path(cfg.output_dir) / "DATA_CARD.md") as handle:
        handle.write(render_data_card(card))
    write_jsonl_atomic(Path(cfg.reports_dir) / "rejected.jsonl", rejected)
    return {"counts": counts, "inputs_missing": [i.path for i in missing], "sha256": hashes}
