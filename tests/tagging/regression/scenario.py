"""The fixed scenario of the tagging regression test: scripted replies (some unparseable, some
LLM errors) for the team and the single-LLM baseline on 24 demo pairs, en + zh, in ``text`` mode.

``record.py`` wrote ``expected.json`` from the code before the harness move; the test runs the
same scenario on the current code and compares predictions, metrics and SFT rows.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.llm.scripted import ScriptedBackend
from tests.tagging.scripted import numbers, question_of

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = Path(__file__).parent / "expected.json"
PLAN = "<semantic> Does the question ask for a result of an operation?\n<numerical> Is the first number below 60?"


def _semantic(messages) -> str:
    question = question_of(messages)
    if len(question) % 7 == 0:
        return "I am not sure."  # unparseable on every attempt: a failed sub-task
    return "It fits. <Yes>" if len(question) % 3 else "It does not fit. <No>"


def _single(messages) -> str:
    question = question_of(messages)
    if len(question) % 5 == 0:
        return "Maybe."
    return "Reasoning done. <Yes>" if "many" in question or "多少" in question else "No match. <No>"


def _args(messages) -> str:
    found = numbers(question_of(messages))
    return json.dumps({"first": found[0]}) if found else "no numbers here"


def rules():
    return [
        (r"task planner|任务规划者", PLAN),
        (r"question solver|解题者", lambda m: f"Work it out. Final answer: {numbers(question_of(m))[-1:]}"),
        (r"semantic judge|语义判断者", _semantic),
        (r"First step: extract|第一步", _args),
        (r"Second step: write|第二步", "```python\nprint(first < 60)\n```"),
        (r"expert math teacher|数学老师", _single),
    ]


def backend() -> ScriptedBackend:
    return ScriptedBackend(rules(), identity="scripted-regression")


def config_data(tmp_path: Path) -> dict:
    """The ``tagging`` section of the scenario (text mode; outputs under ``tmp_path``)."""
    return {
        "data": {"path": str(ROOT / "data/tagging/demo.jsonl"), "limit": 24, "seed": 3},
        "demos": {"pool_per_concept": 3, "k": 2},
        "systems": ["team", "single_llm"],
        "output_mode": "text",
        "concurrency": 4,
        "progress": False,
        "llm": {
            "default": {"kind": "scripted", "replies": "unused.jsonl", "model": "scripted-regression"},
            "cache": None,
        },
        "team": {"failure_policy": "semantic", "max_attempts": 2, "max_constraints": 2},
        "outputs": {
            "generated_dir": str(tmp_path / "generated"),
            "reports_dir": str(tmp_path / "reports"),
        },
    }


def portable(value):
    """``value`` with this checkout's absolute path written ``<repo>`` (recorded files hold no machine's paths)."""
    if isinstance(value, dict):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [portable(item) for item in value]
    if isinstance(value, str) and value.startswith(str(ROOT)):
        return "<repo>" + value[len(str(ROOT)) :]
    return value


def read_outputs(tmp_path: Path) -> dict:
    gen = tmp_path / "generated"

    def rows(name):
        return [json.loads(line) for line in (gen / name).read_text(encoding="utf-8").splitlines()]

    return {"predictions": rows("predictions.jsonl"), "sft": rows("sft.jsonl")}
