"""The kept pairs in every form their users read.

- ``dpo.jsonl``: the project's DPO rows (``pipelines.training.rows.dpo_row``), which are trl's
  conversational preference format: ``prompt`` (system + turns, ending with the student), ``chosen``
  and ``rejected`` (one assistant message each), plus ``id``, ``source``, ``meta``;
- ``preference/``: the same rows saved with ``datasets`` (``meta`` as a JSON string), which
  ``trl.DPOTrainer`` takes unchanged;
- ``sft.jsonl``: SFT rows of the chosen replies (``messages`` = prompt + chosen);
- ``llamafactory/<name>.json`` + ``dataset_info.json``: LLaMA-Factory's sharegpt preference layout
  (``conversations`` of human/gpt turns, ``chosen``/``rejected`` gpt messages, ``system``) with
  ``ranking: true``, and ``<name>_sft`` for SFT of the chosen replies.

A pair here is ``{"id", "language", "prompt": [messages], "chosen": str, "rejected": str, "meta": {}}``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pipelines.io import write_json_atomic, write_jsonl_atomic
from pipelines.training.rows import dpo_row, sft_row

SOURCE = "ram2c"
SHAREGPT_ROLES = {"user": "human", "assistant": "gpt"}


def _meta(pair: dict) -> dict:
    return {"language": pair["language"], **pair.get("meta", {})}


def dpo_rows(pairs: list[dict]) -> list[dict]:
    """The shared DPO rows (trl's conversational preference format) of kept pairs."""
    return [
        dpo_row(p["prompt"], p["chosen"], p["rejected"], source=SOURCE, sample_id=p["id"], meta=_meta(p)) for p in pairs
    ]


def sft_rows(pairs: list[dict]) -> list[dict]:
    """The shared SFT rows of the chosen replies (prompt + chosen)."""
    chosen = [{"role": "assistant", "content": p["chosen"]} for p in pairs]
    return [
        sft_row(p["prompt"] + [c], source=SOURCE, sample_id=p["id"], meta=_meta(p))
        for p, c in zip(pairs, chosen, strict=True)
    ]


def pair_of_row(row: dict) -> dict:
    """A kept pair back from its DPO row (what the LLaMA-Factory export reads)."""
    return {
        "id": row["id"],
        "prompt": row["prompt"],
        "chosen": row["chosen"][0]["content"],
        "rejected": row["rejected"][0]["content"],
        "language": row["meta"].get("language", ""),
    }


def sharegpt_row(pair: dict, *, preference: bool = True) -> dict[str, Any]:
    """LLaMA-Factory sharegpt: the system prompt apart, human/gpt turns alternating from human."""
    messages = pair["prompt"]
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    turns = [{"from": SHAREGPT_ROLES[m["role"]], "value": m["content"]} for m in messages if m["role"] != "system"]
    if preference:
        row = {
            "conversations": turns,
            "chosen": {"from": "gpt", "value": pair["chosen"]},
            "rejected": {"from": "gpt", "value": pair["rejected"]},
        }
    else:
        row = {"conversations": turns + [{"from": "gpt", "value": pair["chosen"]}]}
    row["system"] = system
    return row


def dataset_info(name: str) -> dict[str, Any]:
    """The ``dataset_info.json`` entries: the preference set (ranking) and the SFT set."""
    columns = {"messages": "conversations", "system": "system"}
    return {
        name: {
            "file_name": f"{name}.json",
            "formatting": "sharegpt",
            "ranking": True,
            "columns": {**columns, "chosen": "chosen", "rejected": "rejected"},
        },
        f"{name}_sft": {"file_name": f"{name}_sft.json", "formatting": "sharegpt", "columns": columns},
    }


def save_preference_dataset(rows: list[dict], folder: Path) -> None:
    """Save DPO rows with ``datasets`` (meta as JSON text), replacing ``folder`` only when complete."""
    from datasets import Dataset

    table = [{**r, "meta": json.dumps(r["meta"], ensure_ascii=False, sort_keys=True)} for r in rows]
    columns = ["id", "source", "prompt", "chosen", "rejected", "meta"]
    dataset = Dataset.from_list(table) if table else Dataset.from_dict({c: [] for c in columns})
    tmp = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    dataset.save_to_disk(str(tmp))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def write_final_exports(dpo: list[dict], out: Path | str, *, name: str) -> dict[str, int]:
    """The exports that need every kept pair at once, from the DPO rows: ``preference/`` (datasets)
    and ``llamafactory/`` (sharegpt preference + SFT files, ``dataset_info.json``)."""
    out = Path(out)
    save_preference_dataset(dpo, out / "preference")
    pairs = [pair_of_row(r) for r in dpo]
    factory = out / "llamafactory"
    write_json_atomic(factory / f"{name}.json", [sharegpt_row(p) for p in pairs])
    write_json_atomic(factory / f"{name}_sft.json", [sharegpt_row(p, preference=False) for p in pairs])
    write_json_atomic(factory / "dataset_info.json", dataset_info(name))
    return {"preference": len(dpo), "llamafactory": len(pairs)}


def write_exports(pairs: list[dict], out: Path | str, *, name: str) -> dict[str, int]:
    """Every export of ``pairs`` at once (the stage streams dpo/sft rows instead); rows per file."""
    out = Path(out)
    dpo = dpo_rows(pairs)
    counts = {
        "dpo.jsonl": write_jsonl_atomic(out / "dpo.jsonl", dpo),
        "sft.jsonl": write_jsonl_atomic(out / "sft.jsonl", sft_rows(pairs)),
    }
    return counts | write_final_exports(dpo, out, name=name)
