"""Which files of two runs of a team must be equal, and how (the sets the shard tests use)."""

from __future__ import annotations

from pathlib import Path

from tests.shard_checks import assert_same_outputs

GENERATED = {
    "tagging": {"predictions.jsonl", "sft.jsonl", "split.json"},
    "kgc": {"predictions.jsonl", "sft.jsonl"},
    "ram2c": {"predictions.jsonl", "dpo.jsonl", "sft.jsonl", "dialogues.jsonl", "dropped.jsonl",
              "topics/predictions.jsonl", "topics/dropped.jsonl"},
}
TRACES = {"tagging": {"traces.jsonl"}, "kgc": {"traces.jsonl"}, "ram2c": {"traces.jsonl", "topics/traces.jsonl"}}
REPORTS = {
    "tagging": {"metrics.json", "failures.json", "table.md"},
    "kgc": {"failures.json", "table.md", "per_type.md", "rounds.csv"},
    "ram2c": {"failures.json"},
}
REPORTS_RUN_STATE = {"tagging": {"usage.json"}, "kgc": {"usage.json", "metrics.json"},
                     "ram2c": {"usage.json", "metrics.json"}}


def same_outputs(team: str, one: Path, other: Path) -> str:
    """``"equal"`` when ``other``'s files of ``team`` equal ``one``'s, else what differs."""
    try:
        assert_same_outputs(
            one / "data/generated" / team,
            other / "data/generated" / team,
            byte_identical=GENERATED[team],
            traces=TRACES[team],
            roots=(one, other),
        )
        assert_same_outputs(
            one / "reports" / f"generate_{team}",
            other / "reports" / f"generate_{team}",
            byte_identical=REPORTS[team],
            run_state=REPORTS_RUN_STATE[team],
            roots=(one, other),
        )
    except AssertionError as exc:
        return f"differs: {str(exc)[:500]}"
    return "equal"
