"""Real team output for the report and trace-browser tests, recorded from a smoke-profile run by
``python -m tests.evaluation.recorded.record`` (see there; ``smoke/RECORDED.json`` says when and
from which commit). No test of tests/evaluation invents a team's rows: they read these files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RECORDED = Path(__file__).resolve().parent / "smoke"
TEAMS = ("tagging", "kgc", "ram2c", "ram2c_topics")
FOLDERS = {"tagging": "data/generated/tagging", "kgc": "data/generated/kgc", "ram2c": "data/generated/ram2c",
           "ram2c_topics": "data/generated/ram2c/topics"}  # fmt: skip
FILES = (
    "params.yaml",
    "reports/generate_tagging/metrics.json",
    "reports/generate_kgc/metrics.json",
    "reports/generate_kgc/rounds.csv",
    "reports/generate_ram2c/metrics.json",
    "reports/train/sft/metrics.json",
    "reports/train/sft/loss.csv",
    "reports/train/dpo/metrics.json",
    "reports/train/dpo/loss.csv",
    "reports/evaluate/metrics.json",
    *[f"{FOLDERS[team]}/{name}" for team in TEAMS for name in ("traces.jsonl", "predictions.jsonl")],
    "data/generated/ram2c/dpo.jsonl",  # the pairs the team exported (the trace view's final pair must be these)
    # the evaluate stage's tutoring run: the prompts, both arms' replies, and the judged comparisons
    "data/evaluate/tutoring/prompts.jsonl",
    *[f"data/evaluate/tutoring/replies/{arm}/predictions.jsonl" for arm in ("tuned", "base")],
    *[f"data/evaluate/tutoring/comparisons/{key}/{name}" for key in ("tuned_vs_base", "tuned_vs_ref_r")
      for name in ("judgments.jsonl", "traces.jsonl")],
)
TUTORING = RECORDED / "data" / "evaluate" / "tutoring"


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def traces(team: str) -> list[dict]:
    """The recorded ``traces.jsonl`` rows of ``team`` (one of :data:`TEAMS`)."""
    return jsonl(RECORDED / FOLDERS[team] / "traces.jsonl")


def records(team: str) -> dict[str, dict]:
    """The recorded ``predictions.jsonl`` rows of ``team`` by id."""
    return {str(row["id"]): row for row in jsonl(RECORDED / FOLDERS[team] / "predictions.jsonl")}


def metrics(stage_folder: str) -> dict:
    """A recorded metrics file, e.g. ``metrics("generate_ram2c")`` or ``metrics("train/dpo")``."""
    return json.loads((RECORDED / "reports" / stage_folder / "metrics.json").read_text(encoding="utf-8"))


def lay_out(root: Path, *, skip: tuple[str, ...] = ()) -> None:
    """Every recorded file at its place under ``root`` (a project folder), but those in ``skip``."""
    for name in FILES:
        if name in skip:
            continue
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(RECORDED / name, root / name)
