"""The comparisons of the tutoring evaluation: per (system, baseline) pair the prompts both
answered, judged per dimension by the HTS judges (balanced positions, each judge its own order),
scored 4/2/0 with Fleiss' kappa, and laid out as the RAM2C paper's Tables 1-3.

Judging goes through the generation harness, per pair under ``<out>/comparisons/<system>_vs_<baseline>/``
(``judgments.jsonl``, ``traces.jsonl`` with every judge prompt and reply, ``failures.json``): a
judge call that failed for good counts as a failed item, and more unscored judgments (failed or
never parsed) than ``max_failed_share`` stop the stage naming ``failures.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.agents.harness import GenerationOutputs, System, run_systems
from pipelines.evaluation.arms.tutoring_config import TutoringEvalConfig, comparison_key
from pipelines.evaluation.hts.agents.pairwise_judge import make_pairwise_judge
from pipelines.evaluation.hts.config import build_judges
from pipelines.evaluation.hts.judging import HTSItem, Judgment, is_tie, item_worker
from pipelines.evaluation.hts.scoring import hts_scores, judge_validity, position_preference
from pipelines.io import read_jsonl, write_json_atomic
from pipelines.stage import StageError


def comparison_items(prompts: Sequence[Any], answered: Mapping[str, Mapping[str, str]], pair) -> list[HTSItem]:
    """The items both systems of ``pair`` answered (StageError when none)."""
    system, baseline = pair
    mine, theirs = answered[system], answered[baseline]
    items = [
        HTSItem(p.id, p.topic, p.answer, mine[p.id], theirs[p.id], p.language, p.persona)
        for p in prompts
        if p.id in mine and p.id in theirs
    ]
    if not items:
        raise StageError(
            f"tutoring: no held-out prompt was answered by both {system!r} and {baseline!r} ({len(prompts)} asked); "
            "see their replies/<system>/traces.jsonl"
        )
    return items


async def judge_comparison(
    items: Sequence[HTSItem],
    runtime: Any,
    cfg: TutoringEvalConfig,
    *,
    key: str,
    out: Path,
    progress: bool,
) -> dict[str, Any]:
    """Judge one comparison (see the module docstring); returns ``{"judgments", "ties", "failures"}``:
    identical replies are ties (no judge call). :func:`score_comparisons` scores them."""
    hts = cfg.hts
    worker = item_worker(
        items,
        build_judges(runtime, hts),
        agent=make_pairwise_judge(max_attempts=hts.max_attempts, reasoning=hts.reasoning),
        seed=hts.seed,
        comparison=key,
        dimensions=hts.dimensions,
        mode=hts.mode,
        reasoning=hts.reasoning,
    )
    folder = out / "comparisons" / key
    await run_systems(
        items,
        [System("judges", worker)],
        accounting=runtime.accounting,
        outputs=GenerationOutputs(generated_dir=str(folder), reports_dir=str(folder)),
        sample_id=lambda i: i.id,
        prediction_row=lambda i, v: {"id": i.id, "comparison": key},
        exports={"judgments.jsonl": lambda i, r: [j.to_row() for j in r["judges"] or []]},
        concurrency=hts.concurrency,
        max_failed_share=cfg.max_failed_share,
        progress=progress,
        desc=f"HTS judging {key}",
    )
    judgments = [Judgment.from_row(r) for r in read_jsonl(folder / "judgments.jsonl")]
    expected = len(items) * len(hts.judges) * len(hts.dimensions)
    unscored = expected - sum(j.outcome is not None for j in judgments)
    failures = {"judgments": expected, "unscored": unscored, "share": round(unscored / expected, 4)}
    errors: dict[str, int] = {}
    for j in judgments:
        if j.outcome is None:
            kind = (j.error or "unscored").split(":", 1)[0].split(" (")[0]
            errors[kind] = errors.get(kind, 0) + 1
    failures["by_kind"] = errors
    summary = json.loads((folder / "failures.json").read_text(encoding="utf-8"))
    write_json_atomic(folder / "failures.json", {**summary, "judgments": failures})
    if unscored / expected > cfg.max_failed_share:
        raise StageError(
            f"HTS judging {key}: {unscored} of {expected} judgments unscored ({unscored / expected:.0%} > "
            f"max_failed_share {cfg.max_failed_share:.0%}; by kind: {errors}); judge prompts and replies in "
            f"{folder / 'traces.jsonl'}, summary in {folder / 'failures.json'}"
        )
    ties = {"items": len(items), "ties": sum(is_tie(i) for i in items)}
    return {"judgments": judgments, "ties": ties, "failures": failures}


def score_comparisons(
    judged: Mapping[tuple[str, str], dict], cfg: TutoringEvalConfig, *, min_items: int, models: Mapping[str, str]
) -> None:
    """Validity first, over every comparison of the run (a judge is one rater whatever the pair):
    :func:`judge_validity` under ``hts.validity``; the judges that fail it are ``withheld`` from every
    comparison's scores, kappa and deltas. Then per comparison ``scores`` (kappa between distinct
    ``models`` only, ``{judge: model}``) and ``position_preference``; adds those, ``validity`` and
    ``withheld`` to each entry of ``judged``."""
    hts = cfg.hts
    validity = judge_validity([j for entry in judged.values() for j in entry["judgments"]], hts.validity)
    withheld = [judge for judge, v in validity.items() if v["flagged"]]
    for entry in judged.values():
        scores = hts_scores(
            entry["judgments"],
            resamples=hts.resamples,
            seed=hts.seed,
            confidence=hts.confidence,
            min_items=min_items,
            withheld=withheld,
            models=models,
        )
        entry.update(
            scores=scores,
            position_preference=position_preference(entry["judgments"]),
            validity=validity,
            withheld=withheld,
        )


def raters_line(judge_models: Mapping[str, str]) -> dict[str, Any]:
    """What the kappa measures: ``{"judges": {name: model}, "distinct_models", "note"}``; judges
    that are seeds of one model agree with themselves, which is not inter-annotator agreement."""
    models = list(judge_models.values())
    names = ", ".join(judge_models)
    if len(models) > 1 and len(set(models)) == 1:
        note = (
            f"judges {names} are seeds of one model ({models[0]}): no kappa (that needs distinct raters); "
            "their agreement is shown as self-consistency"
        )
    elif len(set(models)) == len(models):
        note = f"judges {names}: {len(models)} distinct model(s) ({', '.join(models)})"
    else:
        note = (
            f"judges {names} on {len(set(models))} models ({', '.join(dict.fromkeys(models))}); some share a model: "
            "kappa over one judge per model, the seeds of one model as self-consistency"
        )
    return {"judges": dict(judge_models), "distinct_models": len(set(models)) == len(models), "note": note}


def hts_tables(
    cfg: TutoringEvalConfig,
    judged: Mapping[tuple[str, str], dict],
    labels: Mapping[str, str],
    described: Mapping[tuple[str, str], str],
    *,
    raters: dict[str, Any],
    head: str,
) -> dict[str, Any]:
    """The ``tables`` of the metrics: per table its rows ``<system> vs <baseline>`` (scores per
    dimension), each row's judges' position shares and items, the raters and a provenance line."""
    tables = {}
    for table, pairs in cfg.comparisons.by_table().items():
        rows, positions, comparisons, validity = {}, {}, {}, {}
        for pair in pairs:
            label = f"{labels[pair[0]]} vs {labels[pair[1]]}"
            rows[label] = judged[pair]["scores"]
            positions[label] = judged[pair]["position_preference"]
            validity[label] = {"judges": judged[pair]["validity"], "ties": judged[pair]["ties"]}
            n = max((s["items"] for s in judged[pair]["scores"].values()), default=0)
            comparisons[label] = {"system": pair[0], "baseline": pair[1], "n": n, "key": comparison_key(*pair)}
        parts = "; ".join(
            f"{label}: {models + ', ' if models != label else ''}{c['n']} items"
            for label, c in comparisons.items()
            for models in [described[(c["system"], c["baseline"])]]
        )
        provenance = f"{head}; {parts}; {raters['note']}"
        tables[table] = {
            "rows": rows,
            "position_preference": positions,
            "validity": validity,
            "comparisons": comparisons,
            "raters": raters["note"],
            "provenance": provenance,
        }
    return tables
