"""The Hugging Face dataset card (``<output_dir>/<kind>/README.md``) with measured facts.

YAML metadata in the Hub's convention (``license``, ``language``, ``task_categories``,
``size_categories``, ``pretty_name``, ``tags``, ``source_pipeline``, and ``configs`` naming the
``train``/``eval`` splits, so ``datasets.load_dataset(folder)`` reads them by name), then: rows per
source and split, token counts with the training tokenizer (and a text histogram), languages,
distinct-n and self-similarity of prompts and completions, DPO chosen vs rejected length, and the
rows each filter removed with examples.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import yaml

from pipelines.training.near_duplicates import jaccard
from pipelines.training.text_ngrams import distinct_n, is_cjk, ngrams, units

SELF_SIMILARITY_SAMPLE = 200
LICENSE = "apache-2.0"
FILTERS = ("invalid", "duplicates", "near_duplicates", "contaminated", "too_long")


def size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def language_of(row: dict[str, Any]) -> str:
    return "zh" if is_cjk(row["prompt"][-1]["content"]) else "en"


def self_similarity(texts: list[str], *, shingle: int = 5) -> float:
    """Mean over texts of the highest Jaccard similarity (word/character ``shingle``-grams) to another
    text; the first ``SELF_SIMILARITY_SAMPLE`` texts. 0 = nothing shared, 1 = every text has a copy."""
    sets = [frozenset(ngrams(units(t), shingle)) for t in texts[:SELF_SIMILARITY_SAMPLE]]
    if len(sets) < 2:
        return 0.0
    best = [max(jaccard(s, o) for j, o in enumerate(sets) if j != i) for i, s in enumerate(sets)]
    return round(sum(best) / len(best), 4)


def histogram(values: list[int], *, bins: int = 8, width: int = 30) -> list[str]:
    """A text histogram: one line per bin, ``[lo, hi) count ####``."""
    if not values:
        return ["(no rows)"]
    lo, hi = min(values), max(values) + 1
    step = max(1, -(-(hi - lo) // bins))
    counts = Counter((v - lo) // step for v in values)
    top = max(counts.values())
    bars = {b: "#" * max(1, round(width * c / top)) for b, c in counts.items()}
    return [
        f"{lo + b * step:>6}-{lo + (b + 1) * step - 1:<6} {counts[b]:>6} {bars.get(b, '')}"
        for b in range((hi - lo + step - 1) // step)
    ]


def _stats(values: list[int]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(values), "min": ordered[0], "median": ordered[len(ordered) // 2], "max": ordered[-1],
            "mean": round(sum(values) / len(values), 1)}  # fmt: skip


def measure(splits: dict[str, list[dict[str, Any]]], kind: str, *, tokens: dict[str, int], reply_tokens) -> dict:
    """The card's measured facts. ``tokens``: each row's rendered length by row id; ``reply_tokens``:
    text -> its length in tokens of the training tokenizer."""
    rows = [row for split in splits.values() for row in split]
    replies = ("completion",) if kind == "sft" else ("chosen", "rejected")
    texts = {"prompt": [r["prompt"][-1]["content"] for r in rows]}
    texts |= {column: [r[column][0]["content"] for r in rows] for column in replies}
    facts: dict[str, Any] = {
        "rows": {name: len(split) for name, split in splits.items()},
        "by_source": {
            name: dict(sorted(Counter(r["source"] for r in split).items())) for name, split in splits.items()
        },
        "languages": dict(sorted(Counter(language_of(r) for r in rows).items())),
        "tokens": _stats([tokens[r["id"]] for r in rows if r["id"] in tokens]),
        "text": {
            column: {
                "distinct_1": distinct_n(values, 1),
                "distinct_2": distinct_n(values, 2),
                "self_similarity": self_similarity(values),
            }  # fmt: skip
            for column, values in texts.items()
        },
    }
    if kind == "dpo":
        facts["reply_tokens"] = {column: _stats([reply_tokens(t) for t in texts[column]]) for column in replies}
    return facts


def render_card(kind: str, facts: dict[str, Any], *, removed: dict[str, int], examples: dict[str, list], target: dict,
                token_values: list[int]) -> str:  # fmt: skip
    """``README.md`` of one dataset folder."""
    total = sum(facts["rows"].values())
    splits = [name for name, n in facts["rows"].items() if n]
    metadata = {
        "license": LICENSE,
        "language": sorted(facts["languages"]) or ["en"],
        "task_categories": ["text-generation"],
        "size_categories": [size_category(total)],
        "pretty_name": f"edumas {kind.upper()} rows",
        "tags": ["synthetic", "education", "multi-agent", kind],
        "source_pipeline": "edumas make_datasets (generate_tagging, generate_kgc, generate_ram2c)",
        "configs": [
            {"config_name": "default", "data_files": [{"split": name, "path": f"{name}/*.arrow"} for name in splits]}
        ],  # fmt: skip
    }
    what = "prompt -> completion (SFT)" if kind == "sft" else "prompt -> chosen / rejected (DPO preference pairs)"
    lines = ["---", yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True).strip(), "---", "",
             f"# edumas {kind.upper()} dataset", "",
             f"{what}, generated by the edumas agent teams and cleaned by `make_datasets` (validation, exact and "
             "near-duplicate removal, decontamination against every evaluation item, length filter). "
             "Load with `datasets.load_from_disk` (or `load_dataset` on this folder). Measured on "
             f"{total} rows with the `{target['tokenizer']}` tokenizer ({target['section']}).", "",
             "## Rows", "", "| split | rows | by source (team) |", "|---|---|---|"]  # fmt: skip
    for name, n in facts["rows"].items():
        lines.append(f"| {name} | {n} | {json.dumps(facts['by_source'][name], ensure_ascii=False)} |")
    lines += ["", f"Languages (of the last user message): {json.dumps(facts['languages'])}", "",
              "## Token counts", "", f"Rendered conversation length (chat template): {json.dumps(facts['tokens'])}",
              "", "```", *histogram(token_values), "```", ""]  # fmt: skip
    lines += ["## Text diversity", "", "| text | distinct-1 | distinct-2 | self-similarity |", "|---|---|---|---|"]
    for column, value in facts["text"].items():
        lines.append(f"| {column} | {value['distinct_1']} | {value['distinct_2']} | {value['self_similarity']} |")
    lines += ["", "Self-similarity: mean highest Jaccard (5-gram shingles) of a text to another one.", ""]
    if "reply_tokens" in facts:
        lines += ["## Chosen vs rejected length (tokens)", "", "| reply | n | min | median | max | mean |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for column, s in facts["reply_tokens"].items():
            lines.append(f"| {column} | {s['n']} | {s.get('min', '')} | {s.get('median', '')} | {s.get('max', '')} | "
                         f"{s.get('mean', '')} |")  # fmt: skip
        lines.append("")
    lines += ["## Rows removed", "", "| filter | rows | examples |", "|---|---|---|"]
    for name in FILTERS:
        shown = "; ".join(f"`{e}`" for e in examples.get(name, [])[:3])
        lines.append(f"| {name} | {removed.get(name, 0)} | {shown} |")
    return "\n".join(lines) + "\n"
