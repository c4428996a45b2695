"""The SFT adapter as the CooperKGC experts, against the base model, on sentences that gave no SFT row.

Both arms are the KGC team's :meth:`~pipelines.agents.team_interface.Team.generate_async` (the
team interface, :mod:`pipelines.teams`) with the ``kgc`` section overridden:
CooperKGC alone at 0 shots, ``items`` sentences per dataset drawn with ``seed`` (null: each
dataset's own sample size and seed, so with no SFT row excluded the base arm repeats the generation
stage's requests) from the sentences whose id is not in ``data/generated/kgc/sft.jsonl``; outputs
under ``<traces_dir>/kgc/{base,tuned}``. Scores are the generation stage's strict micro-F1, per
dataset and pooled over every evaluated sentence (the bootstrap resamples sentences).
"""

from __future__ import annotations

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
from pipelines.kgc.config import KGCConfig, OutputsConfig
from pipelines.kgc.report import items_from_json
from pipelines.kgc.scoring import Counts, score
from pipelines.stage import StageError
from pipelines.stats.bootstrap import delta_row
from pipelines.teams import KGC
from pipelines.training.trained_rows import sft_sentence_ids

SYSTEM = "cooperkgc@0shot"


def evaluated_datasets(kgc: KGCConfig, names: list[str] | None) -> set[str]:
    """The ``kgc.datasets`` entries the arms evaluate: ``names`` (``evaluate.kgc.datasets``), or every entry
    with ``evaluate: true``; a name that is no evaluated entry is a StageError saying which are."""
    evaluated = [d.name for d in kgc.datasets if d.evaluate]
    if names is None:
        return set(evaluated)
    if unknown := [n for n in names if n not in evaluated]:
        raise StageError(
            f"evaluate.kgc.datasets: {', '.join(unknown)} is not a kgc.datasets entry with evaluate: true; "
            f"choose from {', '.join(evaluated) or '(none)'}"
        )
    return set(names)


def arm_config(kgc: KGCConfig, ev: EvaluateConfig, *, llm: Any, folder: Path) -> KGCConfig:
    """The ``kgc`` section for one arm: CooperKGC at 0 shots on the held-out sample, outputs in ``folder``."""
    sample = {} if ev.kgc.items is None else {"sample": ev.kgc.items}
    seed = {} if ev.kgc.seed is None else {"seed": ev.kgc.seed}
    chosen = evaluated_datasets(kgc, ev.kgc.datasets)
    return kgc.model_copy(
        update={
            "systems": ["cooperkgc"],
            "shots": [0],
            "datasets": [d.model_copy(update={**sample, **seed, "evaluate": d.name in chosen}) for d in kgc.datasets],
            "llm": llm,
            "outputs": OutputsConfig(generated_dir=str(folder), reports_dir=str(folder)),
            "progress": ev.progress,
            # an arm measures its model: an unparseable reply is scored (as a miss), not a reason to stop
            "max_unparseable_share": 1.0,
        }
    )


def sentence_counts(folder: Path) -> dict[str, dict[str, int]]:
    """``{sentence id: {"tp", "pred", "gold"}}`` of the final round of an arm (a failed sentence predicts nothing)."""
    out = {}
    for row in read_jsonl(folder / "predictions.jsonl"):
        prediction = row["predictions"].get(SYSTEM) or {}
        final = prediction.get("rounds", [[]])[-1] if prediction.get("rounds") else []
        gold, predicted = (items_from_json(row["task"], items) for items in (row["gold"], final))
        overall = score(row["task"], [(gold, predicted, row["text"])], matching=row.get("matching", "text"))["overall"]
        out[row["id"]] = {k: overall[k] for k in ("tp", "pred", "gold")}
    return out


def micro(counts: list[dict[str, int]]) -> dict[str, float]:
    """Pooled micro precision, recall and F1 of per-sentence counts."""
    pooled = Counts(*(sum(c[k] for c in counts) for k in ("tp", "pred", "gold")))
    return {"precision": pooled.precision, "recall": pooled.recall, "f1": pooled.f1}


def micro_f1(counts: list[dict[str, int]]) -> float:
    return micro(counts)["f1"]


async def evaluate_kgc(kgc: KGCConfig, ev: EvaluateConfig, *, root: Path) -> dict[str, Any]:
    """Run both arms; returns ``{"section": metrics.json's kgc section, "deltas": [rows], "specs"}``."""
    spec = ev.kgc
    adapter = adapter_under_test(spec.tuned_backend, root / ev.sft_adapter, method="sft")
    trained = sft_sentence_ids(kgc, root, root / ev.sft_dataset)
    out = root / ev.outputs.traces_dir / "kgc"
    tuned_llm = tuned_llm_config(kgc.llm, spec.roles, adapter=adapter, backend=spec.tuned_backend)

    async def run(arm: str, llm: Any) -> dict[str, Any]:
        cfgs = {"kgc": arm_config(kgc, ev, llm=llm, folder=out / arm)}
        metrics = await KGC.generate_async(cfgs, root=root, exclude_ids=trained)
        counts = sentence_counts(out / arm)
        check_held_out(counts, trained, system="kgc", where="SFT rows of generate_kgc")
        return {"metrics": metrics, "counts": counts}

    arms = await run_together({"base": run("base", kgc.llm), "tuned": run("tuned", tuned_llm)})
    base, tuned = arms["base"], arms["tuned"]
    deltas = [
        delta_row(
            tuned["counts"],
            base["counts"],
            team="kgc",
            system="cooperkgc",
            metric="micro_f1",
            statistic=micro_f1,
            **ev.bootstrap.model_dump(),
        )
    ]
    base_model = Path(kgc.llm.spec_for(spec.roles[0]).model).name
    tuned_name = tuned_model_name(spec.tuned_backend, base_model, ev.sft_adapter)
    labels = {"base": f"CooperKGC, base ({base_model})", "tuned": f"CooperKGC, tuned ({tuned_name})"}
    datasets = base["metrics"]["datasets"]
    rows = {
        labels[a]: {name: d["overall"]["f1"] for name, d in arms[a]["metrics"]["systems"][SYSTEM]["datasets"].items()}
        for a in arms
    }
    n = len(base["counts"])
    section = {
        "base": micro(list(base["counts"].values())),
        "tuned": micro(list(tuned["counts"].values())),
        "n": n,
        "provenance": (
            f"{n} held-out sentences ({', '.join(datasets)}; none gave an SFT row), CooperKGC 0-shot with "
            f"{kgc.team.rounds} round(s); experts {', '.join(spec.roles)} on {tuned_name} vs on {base_model}; "
            "strict micro-F1 of the final round"
        ),
        "datasets": [{"name": name, "task": d["task"]} for name, d in datasets.items()],
        "rows": rows,
        "reference": {labels["tuned"]: labels["base"]},
        "roles": list(spec.roles),
        "failed_samples": {a: arms[a]["metrics"]["failed_samples"] for a in arms},
    }
    specs = [llm.spec_for(role) for llm in (kgc.llm, tuned_llm) for role in spec.roles]
    return {"section": section, "deltas": deltas, "specs": specs}
