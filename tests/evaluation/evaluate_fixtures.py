"""A small project in a temporary folder for the evaluate stage: scripted base and tuned replies,
the tagging and KGC generate stages run on them, and a DPO dataset with train / eval splits."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from pipelines.kgc.datasets import DatasetConfig, load_dataset
from pipelines.training.dataset_builder import save_dataset_dict
from pipelines.training.rows import dpo_row, normalise_row
from stages.evaluate import main as evaluate_stage
from stages.generate_kgc import main as generate_kgc
from stages.generate_tagging import main as generate_tagging
from tests.tagging.scripted import STAGE_REPLIES

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data/kgc"
JUDGE = {"match": "Dimension to judge", "reply": "Reply A follows the criteria better.\nVerdict: A"}
TAGGING = STAGE_REPLIES


def gold_replies() -> list[dict]:
    """The base experts name every gold entity and triple of the demo files (recall 1 on NER and RE,
    precision below 1) and one fixed event."""
    ner = load_dataset(DatasetConfig(name="conllpp", format="conll", files=[str(DEMO / "ner_en.conll")]), "/")
    nyt = load_dataset(DatasetConfig(name="nyt11_hrl", format="nyt11_hrl", files=[str(DEMO / "re_en.nyt.jsonl")]), "/")
    entities = dict.fromkeys(f"({e.type}, {e.text})" for s in ner.sentences for e in s.entities)
    triples = dict.fromkeys(f"({t.head}, {t.relation}, {t.tail})" for s in nyt.sentences for t in s.triples)
    return [
        {"match": "The named entity recognition task", "reply": "[" + ", ".join(entities) + "]"},
        {"match": "The relation extraction task", "reply": "[" + ", ".join(triples) + "]"},
        {
            "match": "The event extraction task",
            "reply": "[{Trigger Type: Justice:Convict, Trigger Word: convicted, Arguments: [(Defendant, Li Shaomin)]}]",
        },
    ]


BASE_REPLY = "Good thought. What else do you notice?"
TUNED_REPLY = "What a lovely idea! Why do you think Crusoe felt that way?"
# the tuned model says No to every pair and extracts nothing
TUNED = [
    *[r if r["match"] != "semantic judge" else {**r, "reply": "It does not fit. <No>"} for r in TAGGING],
    {"match": "The named entity recognition task", "reply": "[]"},
    {"match": "The relation extraction task", "reply": "[]"},
    {"match": "The event extraction task", "reply": "[]"},
    {"match": "literature teacher", "reply": TUNED_REPLY},
]
LEVELS = ("recall", "understanding", "analysis", "evaluation", "creation")
NEW_PROMPTS = [  # the topic writer (one question per Bloom level) and the student of new held-out prompts
    *({"match": f"You write discussion questions.*Level: {level}", "reply": f"What did you notice ({level})?"}
      for level in LEVELS),
    {"match": "You play a student", "reply": "I think he was brave because he went to sea."},
]  # fmt: skip
BASE = [JUDGE, *NEW_PROMPTS, *TAGGING, *gold_replies(), {"match": "literature teacher", "reply": BASE_REPLY}]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def dpo_rows(n: int) -> list[dict]:
    """``n`` RAM2C-like DPO rows: the drafter's prompt (system + the student's answer), chosen, rejected."""
    rows = []
    for i in range(n):
        prompt = [
            {"role": "system", "content": f"You are a literature teacher. Discussion topic: topic {i}?"},
            {"role": "user", "content": f"I think Crusoe was brave, answer {i}."},
        ]
        meta = {"language": "en", "topic": f"topic {i}?", "turn": 1, "dialogue": f"d{i}", "student": f"s{i}"}
        rows.append(dpo_row(prompt, f"chosen {i}", f"rejected {i}", source="ram2c", sample_id=f"d{i}-t1", meta=meta))
    return rows


def write_dpo_data(root: Path, *, train: int = 4, evaluation: int = 2, extra: int = 1) -> dict[str, list[dict]]:
    """``data/train/dpo`` (train / eval), its data card and ``data/generated/ram2c/dpo.jsonl`` holding
    every row plus ``extra`` rows that never reached the datasets (e.g. too long)."""
    rows = dpo_rows(train + evaluation + extra)
    clean = [normalise_row(r, "dpo", "ram2c") for r in rows]
    splits = {"train": clean[:train], "eval": clean[train : train + evaluation]}
    save_dataset_dict(splits, "dpo", root / "data/train/dpo")
    card = {"counts": {"dpo": {"train": train, "eval": evaluation}}}
    (root / "data/train/data_card.json").write_text(json.dumps(card))
    jsonl(root / "data/generated/ram2c/dpo.jsonl", rows)
    return splits


def merged(data: dict, overrides: dict) -> dict:
    """``data`` with ``overrides`` put over it, nested mappings merged key by key."""
    out = dict(data)
    for key, value in overrides.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def write_project(root: Path, overrides: dict | None = None, *, kgc_sft_min_f1: float = 0.0) -> Path:
    """params.yaml for tagging / kgc / ram2c / evaluate on scripted replies (``overrides`` merged
    in); returns its path."""
    base, tuned = jsonl(root / "base.jsonl", BASE), jsonl(root / "tuned.jsonl", TUNED)
    llm = f"{{default: {{kind: scripted, replies: {base}}}, cache: cache/llm.sqlite}}"
    params = root / "params.yaml"
    text = textwrap.dedent(f"""\
        tagging:
          data: {{path: {ROOT / "data/tagging/demo.jsonl"}, languages: [en], limit: 6}}
          split: {{generation_limit: 4}}
          demos: {{pool_per_concept: 3, k: 2}}
          systems: [team]
          output_mode: text
          concurrency: 8
          progress: false
          llm: {llm}
        kgc:
          datasets:
            - {{name: conllpp, format: conll, files: [{DEMO / "ner_en.conll"}], sample: 2}}
            - {{name: nyt11_hrl, format: nyt11_hrl, files: [{DEMO / "re_en.nyt.jsonl"}], sample: 2}}
            - {{name: ace05, format: ace05, files: [{DEMO / "ee_en.oneie.jsonl"}], sample: 2}}
          systems: [cooperkgc]
          output_mode: text
          progress: false
          llm: {llm}
          team: {{rounds: 1}}
          sft: {{min_f1: {kgc_sft_min_f1}, keep: answer}}
        ram2c:
          sources: [{{language: en, path: {ROOT / "data/ram2c/lighthouse.en.txt"}}}]
          output_mode: text
          progress: false
          llm: {llm}
        evaluate:
          tagging: {{tuned_backend: {{kind: scripted, model: scripted-tuned, replies: {tuned}}}}}
          kgc: {{tuned_backend: {{kind: scripted, model: scripted-tuned, replies: {tuned}}}}}
          tutoring:
            tuned_backend: {{kind: scripted, model: scripted-tuned, replies: {tuned}}}
            hts: {{mode: text, resamples: 200, judges: [{{name: j1, seed: 1}}, {{name: j2, seed: 2}}]}}
          bootstrap: {{resamples: 300, seed: 7}}
          progress: false
        """)
    params.write_text(yaml.safe_dump(merged(yaml.safe_load(text), overrides or {}), sort_keys=False))
    return params


def generate(root: Path, params: Path) -> None:
    """The tagging and KGC generate stages on the base replies, and the DPO datasets."""
    assert generate_tagging(["--params", str(params)]) == 0
    assert generate_kgc(["--params", str(params)]) == 0
    write_dpo_data(root)


def run_tutoring_evaluate(root: Path, tutoring: dict) -> Path:
    """The evaluate stage on tutoring only (``evaluate.tutoring`` overrides) in ``root``, which it returns."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("EDUMAS_TRACKING", "0")
        write_dpo_data(root)
        params = write_project(root, {"evaluate": {"systems": ["tutoring"], "tutoring": tutoring}})
        assert evaluate_stage(["--params", str(params)]) == 0
    return root
