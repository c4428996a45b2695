"""How long a set of queued ablations will take, said before it starts.

Each experiment reruns the generate stage of the team it changes and every stage after it
(make_datasets, train@sft, train@dpo, evaluate, report); the other stages are restored from DVC's
run cache. The estimate adds the wall times those stages took in the workspace's last run
(``reports/timings/<stage>.json``, written by every stage, :mod:`pipelines.stage`), so it is an
upper bound: a stage whose inputs do not change is restored, not rerun, and requests the baseline
already made are answered by the copied request cache.

    rows = estimate(ablations, root=".", jobs=1)   # [{"name", "seconds", "stages": {stage: s | None}}]
    print(describe(rows))
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.stage import TIMINGS_DIR

DOWNSTREAM = ("make_datasets", "train@sft", "train@dpo", "evaluate", "report")


def stages_rerun(team: str) -> tuple[str, ...]:
    """The stages an experiment on ``team``'s params section runs again."""
    return (f"generate_{team}", *DOWNSTREAM)


def stage_seconds(root: Path | str = ".") -> dict[str, float]:
    """``{stage: wall seconds of its last successful run}`` from ``reports/timings``."""
    found = {}
    for path in sorted((Path(root) / TIMINGS_DIR).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found[str(data["stage"])] = float(data["wall_s"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def estimate(ablations: Sequence[Any], *, root: Path | str = ".", jobs: int = 1) -> dict[str, Any]:
    """Per ablation (``.name``, ``.team``) the seconds of the stages it reruns (None: never timed)
    and their sum; ``total_s`` for the set at ``jobs`` experiments at a time."""
    seconds = stage_seconds(root)
    rows = []
    for ablation in ablations:
        stages = {stage: seconds.get(stage) for stage in stages_rerun(ablation.team)}
        rows.append({"name": ablation.name, "stages": stages,
                     "seconds": sum(s for s in stages.values() if s is not None)})  # fmt: skip
    total = sum(r["seconds"] for r in rows) / max(1, jobs)
    untimed = sorted({s for r in rows for s, v in r["stages"].items() if v is None})
    return {"rows": rows, "total_s": total, "jobs": jobs, "untimed": untimed}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{math.ceil(seconds)} s"


def describe(found: Mapping[str, Any]) -> str:
    """A few lines for the terminal: each experiment, the total, what was never timed."""
    lines = [f"Time estimate (upper bound, from the workspace's last stage times; -j {found['jobs']}):"]
    for row in found["rows"]:
        parts = ", ".join(f"{s} {_minutes(v)}" for s, v in row["stages"].items() if v is not None)
        if not parts:
            lines.append(f"  {row['name']}: unknown (none of its stages was timed)")
            continue
        bound = "at least " if None in row["stages"].values() else "about "
        lines.append(f"  {row['name']}: {bound}{_minutes(row['seconds'])} ({parts})")
    bound = "at least " if found["untimed"] else "about "
    lines.append(f"  the set: {bound}{_minutes(found['total_s'])} for {len(found['rows'])} experiments")
    if found["untimed"]:
        lines.append(f"  not timed yet (run `dvc repro` once for a full estimate): {', '.join(found['untimed'])}")
    return "\n".join(lines)
