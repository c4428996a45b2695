"""The rows a fine-tune was trained on, by source: evaluation keeps them out of its held-out items
(:mod:`pipelines.evaluation.arms`) and ``make_datasets`` out of the evaluation items it
decontaminates against (:mod:`pipelines.training.eval_items`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipelines.io import read_jsonl
from pipelines.kgc.config import KGCConfig


def trained_rows(dataset: str | Path, source: str) -> list[dict[str, Any]]:
    """Rows of ``source`` in every split of the SFT dataset ``make_datasets`` wrote (``meta`` parsed);
    [] when the folder holds no dataset (no SFT rows at all)."""
    folder = Path(dataset)
    if not (folder / "dataset_dict.json").is_file():
        return []
    from datasets import load_from_disk  # heavy: imported only where a dataset was written

    rows = []
    for split in load_from_disk(str(folder)).values():
        for row in split:
            if row.get("source") == source:
                meta = row.get("meta") or "{}"
                rows.append({"id": row["id"], "meta": json.loads(meta) if isinstance(meta, str) else meta})
    return rows


def sft_sentence_ids(kgc: KGCConfig, root: Path, sft_dataset: Path) -> set[str]:
    """Sentence ids (``<dataset>:<index>``) of the generation stage's SFT rows and of the KGC rows
    of the SFT dataset."""
    ids = set()
    for row in read_jsonl(root / kgc.outputs.generated_dir / "sft.jsonl") + trained_rows(sft_dataset, "kgc"):
        dataset = (row.get("meta") or {}).get("dataset", "")
        tail = str(row.get("id", "")).removeprefix("kgc-").removeprefix(f"{dataset}-")
        ids.add(f"{dataset}:{tail}")
    return ids
