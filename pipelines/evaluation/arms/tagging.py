"""The SFT adapter as the tagging team's agents, against the base model, on held-out pairs.

Both arms are the tagging team's :meth:`~pipelines.agents.team_interface.Team.generate_async` (the
team interface, :mod:`pipelines.teams`) with the ``tagging`` section overridden: the team alone on
one backbone (no ``tagging.sizes``), ``items`` pairs of the evaluation split (the generation
stage's seeded sample when ``items`` equals ``tagging.data.limit``, so the base arm's requests are
cache hits), no generation-split run, outputs under ``<traces_dir>/tagging/{base,tuned}``; the tuned arm has
the evaluate roles on ``base + adapter``. The evaluated ids are checked against the generation
stage's ``split.json`` (evaluation split) and its SFT rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.arms.tuned import (
    adapter_under_test,
    check_held_out,
    tuned_llm_config,
    tuned_model_name,
)
from pipelines.evaluation.together import run_together
from pipelines.io import read_jsonl
from pipelines.stage import StageError
from pipelines.stats.bootstrap import delta_row
from pipelines.tagging.config import OutputsConfig, TaggingConfig
from pipelines.tagging.metrics import scored_metrics
from pipelines.teams import TAGGING
from pipelines.training.trained_rows import trained_rows

METRICS = ("accuracy", "precision", "recall", "f1", "coverage")
DELTA_METRICS = ("accuracy", "f1")


def arm_config(tagging: TaggingConfig, ev: EvaluateConfig, *, llm: Any, folder: Path) -> TaggingConfig:
    """The ``tagging`` section for one arm: team only, held-out pairs only, outputs in ``folder``."""
    return tagging.model_copy(
        update={
            "systems": ["team"],
            "sizes": {},  # the arms compare one model, base vs tuned
            "data": tagging.data.model_copy(update={"limit": ev.tagging.items}),
            "split": tagging.split.model_copy(update={"generation_limit": 0}),
            "llm": llm,
            "outputs": OutputsConfig(generated_dir=str(folder), reports_dir=str(folder)),
            "progress": ev.progress,
            # an arm measures its model: an unparseable reply is scored (as a miss), not a reason to stop
            "max_unparseable_share": 1.0,
        }
    )


def trained_and_held_out_ids(tagging: TaggingConfig, root: Path, sft_dataset: Path) -> tuple[set[str], set[str]]:
    """``(ids the SFT rows may come from, ids of the evaluation split)`` as the generation stage
    recorded them (``split.json``, ``sft.jsonl``) and the tagging rows of the SFT dataset."""
    folder = root / tagging.outputs.generated_dir
    split = json.loads((folder / "split.json").read_text(encoding="utf-8"))
    rows = read_jsonl(folder / "sft.jsonl") + trained_rows(sft_dataset, "tagging")
    sft_ids = {str(row.get("id", "")).removeprefix("tagging-") for row in rows}
    return set(split["ids"]["generation"]) | sft_ids, set(split["ids"]["evaluation"])


def team_items(folder: Path) -> dict[str, tuple[int, int | None]]:
    """``{pair id: (label, team prediction or None)}`` of an arm's evaluation rows."""
    rows = read_jsonl(folder / "predictions.jsonl")
    return {r["id"]: (int(r["label"]), r["predictions"].get("team")) for r in rows if r.get("split") == "evaluation"}


def metric_statistic(metric: str, failure_outcome: str):
    """The generation stage's metric of resampled ``(label, prediction)`` items."""

    def statistic(items: list[tuple[int, int | None]]) -> float:
        labels, preds = [label for label, _ in items], [pred for _, pred in items]
        return float(scored_metrics(labels, preds, failure_outcome=failure_outcome)[metric])

    return statistic


async def evaluate_tagging(tagging: TaggingConfig, ev: EvaluateConfig, *, root: Path) -> dict[str, Any]:
    """Run both arms; returns ``{"section": metrics.json's tagging section, "deltas": [rows], "specs"}``."""
    spec = ev.tagging
    adapter = adapter_under_test(spec.tuned_backend, root / ev.sft_adapter, method="sft")
    trained, evaluation_ids = trained_and_held_out_ids(tagging, root, root / ev.sft_dataset)
    out = root / ev.outputs.traces_dir / "tagging"
    tuned_llm = tuned_llm_config(tagging.llm, spec.roles, adapter=adapter, backend=spec.tuned_backend)

    async def run(arm: str, llm: Any) -> dict[str, Any]:
        cfgs = {"tagging": arm_config(tagging, ev, llm=llm, folder=out / arm)}
        metrics = await TAGGING.generate_async(cfgs, root=root)
        items = team_items(out / arm)
        check_held_out(items, trained, system="tagging", where="generation split or SFT rows of generate_tagging")
        outside = sorted(set(items) - evaluation_ids)
        if outside:
            raise StageError(
                f"tagging: {len(outside)} evaluated pair(s) are not in the evaluation split of "
                f"{tagging.outputs.generated_dir}/split.json ({outside[:3]}); rerun generate_tagging with these params"
            )
        return {"metrics": metrics["systems"]["team"], "items": items, "failed": metrics["failed_samples"]}

    arms = await run_together({"base": run("base", tagging.llm), "tuned": run("tuned", tuned_llm)})
    base, tuned = arms["base"], arms["tuned"]
    options = ev.bootstrap.model_dump()
    deltas = [
        delta_row(
            tuned["items"],
            base["items"],
            team="tagging",
            system="team",
            metric=metric,
            statistic=metric_statistic(metric, tagging.failure_outcome),
            **options,
        )
        for metric in DELTA_METRICS
    ]
    base_model = Path(tagging.llm.spec_for(spec.roles[0]).model).name
    tuned_name = tuned_model_name(spec.tuned_backend, base_model, ev.sft_adapter)
    labels = {"base": f"base ({base_model})", "tuned": f"tuned ({tuned_name})"}
    n = len(base["items"])
    section = {
        "base": {m: base["metrics"]["overall"].get(m) for m in METRICS},
        "tuned": {m: tuned["metrics"]["overall"].get(m) for m in METRICS},
        "n": n,
        "provenance": (
            f"{n} held-out pairs of the tagging evaluation split ({tagging.data.path}; none in the SFT rows); "
            f"the multi-agent team with roles {', '.join(spec.roles)} on {tuned_name} vs on {base_model}"
        ),
        "models": {labels[a]: {"systems": {"team": {"overall": arms[a]["metrics"]["overall"]}}} for a in arms},
        "roles": list(spec.roles),
        "failed_samples": {a: arms[a]["failed"] for a in arms},
    }
    specs = [llm.spec_for(role) for llm in (tagging.llm, tuned_llm) for role in spec.roles]
    return {"section": section, "deltas": deltas, "specs": specs}
