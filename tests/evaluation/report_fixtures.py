"""Every input of the report stage, with the key sets each stage really writes (generate_tagging's
``_write_reports``, generate_kgc's ``score_systems`` + ``rounds.csv``, generate_ram2c's
``aggregate``, train's metrics + ``loss.csv``, evaluate's CONTRACTS2 shape), into a project root."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pipelines.ram2c.run import aggregate
from pipelines.tagging.metrics import scored_metrics
from tests.evaluation.test_summary import FIXTURE
from tests.evaluation.trace_fixtures import kgc_rows, ram2c_rows, tagging_rows

LABELS = [1, 1, 0, 0]


def _tagging_system(preds, backbone, **extra):
    return {"overall": scored_metrics(LABELS, preds), "per_knowledge": {}, "questions_run": 4,
            "llm_calls_per_question": 1.0, "tokens_per_question": 590.0, "failed_subtasks": 0,
            "backbone": backbone, **extra}  # fmt: skip


def tagging_metrics() -> dict:
    return {
        "n_pairs": 108, "split": {"by": "row", "evaluation_share": 0.67, "seed": 0,
                                  "counts": {"generation": 36, "evaluation": 72}},
        "n_demonstration_pool": 36, "n_evaluated": 4, "n_generation_run": 2, "sft_rows": 1, "output_mode": "json",
        "failure_outcome": "wrong", "failed_samples": 0,
        "systems": {
            "team": _tagging_system([1, 1, 1, 0], "smollm2-135m-instruct", failed_samples=0, unparseable={},
                                    plan_truncation={"plans": 4, "truncated_plans": 0, "dropped_sub_constraints": 0}),
            "single_llm": _tagging_system([1, None, 0, 0], "smollm2-135m-instruct", failed_samples=0, unparseable={}),
            "embedding": _tagging_system([1, 0, 1, 0], "all-minilm-l6-v2", threshold=0.41, threshold_source="fitted"),
        },
    }  # fmt: skip


def _kgc_dataset(task, f1s):
    return {"task": task, "sentences": 1, "overall": {"precision": f1s[-1], "recall": f1s[-1], "f1": f1s[-1], "tp": 1,
            "pred": 1, "gold": 1}, "per_type": {}, "f1_per_round": f1s}  # fmt: skip


def kgc_metrics() -> dict:
    corrections = {"appeared": 3, "appeared_correct": 1, "appeared_from_peer": 1, "disappeared": 1,
                   "disappeared_correct": 0}  # fmt: skip
    common = {"corrections": corrections, "failed_samples": 0, "failed_subtasks": 1, "unparseable": {},
              "llm_calls": 50, "tokens": 39660}  # fmt: skip
    return {
        "n_evaluated": 3, "output_mode": "json", "rounds": 1,
        "datasets": {"conllpp": {"task": "ner", "language": "en", "fallback": False, "evaluated": 1, "pool": 30},
                     "nyt11_hrl": {"task": "re", "language": "en", "fallback": True, "evaluated": 1, "pool": 9},
                     "ace05": {"task": "ee", "language": "en", "fallback": False, "evaluated": 1, "pool": 4}},
        "left_out": [], "sft_rows": 2, "failed_samples": 0,
        "systems": {
            "cooperkgc@0shot": {"datasets": {"ace05": _kgc_dataset("ee", [0.2, 0.4]),
                                             "conllpp": _kgc_dataset("ner", [0.5, 0.75]),
                                             "nyt11_hrl": _kgc_dataset("re", [0.25, 0.25])}, **common},
            "autokg@0shot": {"datasets": {"ace05": _kgc_dataset("ee", [0.1]), "conllpp": _kgc_dataset("ner", [0.5]),
                                          "nyt11_hrl": _kgc_dataset("re", [0.0])}, **common},
        },
    }  # fmt: skip


def rounds_csv(metrics: dict) -> str:
    lines = ["system,dataset,round,f1"]
    for name, system in metrics["systems"].items():
        for dataset, d in system["datasets"].items():
            if len(d["f1_per_round"]) > 1:
                lines += [f"{name},{dataset},{t},{f1}" for t, f1 in enumerate(d["f1_per_round"])]
    return "\n".join(lines) + "\n"


def ram2c_metrics() -> dict:
    group = {"turns": 2, "retrieved": 4, "accepted": 3, "votes": 12, "yes_votes": 9, "llm_calls": 10, "tokens": 900}
    summaries = [
        {"stopped": None, "turns": 1, "failures": 0, "llm_calls": 20, "tokens": 1800,
         "groups": {"T": group, "P": group}, "kept": ["d0-t0"], "dropped": {}, "chosen_chars": [300],
         "rejected_chars": [120]},
        {"stopped": None, "turns": 1, "failures": 1, "llm_calls": 18, "tokens": 1500,
         "groups": {"T": group}, "kept": [], "dropped": {"d1-t0": "too_long"}, "chosen_chars": [],
         "rejected_chars": []},
        None,
    ]  # fmt: skip
    return {"language": "en", "output_mode": "json", "books": ["data/ram2c/lighthouse.en.txt"], "passages": 3,
            "topics_planned": 3, "topics_written": 3, "topics_dropped": {}, "dialogues": 3,
            "groups_run": ["T", "P", "E"], "experts_per_group": 3, "selection": "vote", **aggregate(summaries),
            "exports": {"dpo.jsonl": 1}, "wall_s": 12.5}  # fmt: skip


def evaluate_metrics() -> dict:
    return {
        "offline_default": True,
        "tagging": {"base": {"accuracy": 0.5, "f1": 0.4}, "tuned": {"accuracy": 0.75, "f1": 0.6}, "n": 4,
                    "provenance": "evaluation split of data/tagging/demo.jsonl"},
        "kgc": {"base": {"f1": 0.2}, "tuned": {"f1": 0.3}, "n": 3, "provenance": "held-out KGC sentences"},
        "tutoring": {"hts": FIXTURE["hts"], "n": 6},
        "deltas": FIXTURE["deltas"],
        "deltas_provenance": "held-out items, paired bootstrap (1000 resamples, seed 0)",
    }  # fmt: skip


def _json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def _jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_params(root: Path, *, default_llm: dict | None = None) -> Path:
    """params.yaml with the report section's defaults and the generators' llm blocks."""
    llm = {"default": default_llm or {"kind": "transformers", "model": "models/base/smollm2-135m-instruct"}}
    base = "models/base/smollm2-135m-instruct"
    train = {run: {"method": run, "tuning": "lora", "model": base} for run in ("sft", "dpo")}
    params = {"report": {"trace_limit": 50}, "tagging": {"llm": llm}, "kgc": {"llm": llm}, "ram2c": {"llm": llm},
              "train": train}  # fmt: skip
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def write_all_inputs(root: Path) -> None:
    _json(root / "reports/generate_tagging/metrics.json", tagging_metrics())
    kgc = kgc_metrics()
    _json(root / "reports/generate_kgc/metrics.json", kgc)
    (root / "reports/generate_kgc/rounds.csv").write_text(rounds_csv(kgc), encoding="utf-8")
    _json(root / "reports/generate_ram2c/metrics.json", ram2c_metrics())
    for run, losses in (("sft", [2.4, 2.1, 1.8]), ("dpo", [0.693, 0.66])):
        _json(root / f"reports/train/{run}/metrics.json", {"train_loss": sum(losses) / len(losses),
                                                             "global_step": len(losses)})  # fmt: skip
        rows = "".join(f"{i + 1},{loss},0.5\n" for i, loss in enumerate(losses))
        (root / f"reports/train/{run}/loss.csv").write_text("step,loss,accuracy\n" + rows, encoding="utf-8")
    _json(root / "reports/evaluate/metrics.json", evaluate_metrics())
    _jsonl(root / "data/generated/tagging/traces.jsonl", tagging_rows())
    _jsonl(root / "data/generated/kgc/traces.jsonl", kgc_rows())
    _jsonl(root / "data/generated/ram2c/traces.jsonl", ram2c_rows())
