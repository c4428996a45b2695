"""The tutoring systems on held-out prompts, judged pairwise (HTS): the RAM2C paper's Tables 1-3.

    prompts (recorded + new, :mod:`tutoring_prompts`)
      -> every system that runs answers each prompt once (:mod:`tutoring_systems`: tuned, base,
         reference models, RAM2C team variants rewriting a system's drafts)
      -> every (system, baseline) pair of ``comparisons`` judged per dimension (:mod:`tutoring_judging`:
         balanced positions, each judge its own order, 4/2/0, Fleiss' kappa)
      -> ``tables`` 1-3, bootstrap deltas of the tuned model's rows, the human rating pack.

It fails loudly: every backend it uses is checked before the first call (an unreachable server or
a missing key stops the stage), and more failed replies of a system or unscored judgments of a
comparison than ``max_failed_share`` stop it with an error naming the ``failures.json`` to read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.arms.tuned import adapter_under_test, tuned_llm_config, tuned_model_name
from pipelines.evaluation.arms.tutoring_config import TUNED, TutoringEvalConfig, comparison_key
from pipelines.evaluation.arms.tutoring_judging import (
    comparison_items,
    hts_tables,
    judge_comparison,
    raters_line,
    score_comparisons,
)
from pipelines.evaluation.arms.tutoring_prompts import evaluation_prompts
from pipelines.evaluation.arms.tutoring_systems import (
    answer_systems,
    open_teams,
    role_of,
    role_spec,
    system_label,
    system_models,
    system_roles,
)
from pipelines.evaluation.hts.scoring import hts_score
from pipelines.evaluation.human.pack import write_human_pack
from pipelines.evaluation.together import run_together
from pipelines.io import write_jsonl_atomic
from pipelines.llm.client import LLMRuntime
from pipelines.llm.config import LLMConfig
from pipelines.ram2c.config import Ram2cConfig
from pipelines.stats.bootstrap import delta_row

PROMPT_ROLES = ("topic_writer", "student")  # the roles that write new held-out prompts


def tutoring_llm(ram2c: Ram2cConfig, cfg: TutoringEvalConfig, adapter: str | None) -> LLMConfig:
    """One config for the run: ``system:tuned`` (the drafter's backend and sampling with the adapter,
    or ``tuned_backend``), the roles of the other systems (:func:`system_roles`), the topic writer
    and student for new prompts, and the judges' roles on the base backend unless ``judge_llm`` is set."""
    role = cfg.roles[0]
    entry = ram2c.llm.roles.get(role)
    base_spec = ram2c.llm.spec_for(role).model_copy(update={"sampling": entry.sampling if entry else None})
    roles = system_roles(ram2c, cfg, drafter=role, base_spec=base_spec)
    if TUNED in cfg.compared():
        roles[role_of(TUNED)] = tuned_llm_config(ram2c.llm, [role], adapter=adapter, backend=cfg.tuned_backend).roles[
            role
        ]
    if cfg.new_prompts:
        roles.update({r: role_spec(None, ram2c, r) for r in PROMPT_ROLES})
    if cfg.judge_llm is None:
        roles.update({r: base_spec.model_copy(update={"sampling": None}) for r in cfg.hts.roles()})
    return LLMConfig(
        default=base_spec.model_copy(update={"sampling": None}),
        roles=roles,
        cache=ram2c.llm.cache,
        sampling=ram2c.llm.sampling,
    )


def metric_name(pair: tuple[str, str], dimension: str) -> str:
    """``hts_<dimension>`` for tuned vs base, ``hts_<dimension>_vs_<baseline>`` for tuned vs another."""
    return f"hts_{dimension}" if pair[1] == "base" else f"hts_{dimension}_vs_{pair[1]}"


def dimension_deltas(judgments, ev: EvaluateConfig, pair: tuple[str, str]) -> list[dict[str, Any]]:
    """Per dimension: the per-item HTS score of the tuned replies (its judges pooled) against parity (50)."""
    rows = []
    for dimension in ev.tutoring.hts.dimensions:
        by_item: dict[str, list[str]] = {}
        for j in judgments:
            if j.dimension == dimension and j.outcome is not None:
                by_item.setdefault(j.item_id, []).append(j.outcome)
        if not by_item:
            continue
        tuned = {item: hts_score(outcomes) for item, outcomes in by_item.items()}
        options = {**ev.bootstrap.model_dump()}
        rows.append(
            delta_row(
                tuned,
                dict.fromkeys(by_item, 50.0),
                team="tutoring",
                system="responder",
                metric=metric_name(pair, dimension),
                scale=1.0,
                **options,
            )
        )
    return rows


def judge_models(cfg: TutoringEvalConfig, llm_cfg: LLMConfig) -> dict[str, str]:
    """``{judge: model}`` (``<model> (<kind>)``), from the config that runs the judges."""
    source = cfg.judge_llm or llm_cfg
    out = {}
    for judge in cfg.hts.judges:
        spec = source.spec_for(judge.role)
        adapter = f" + {spec.adapter}" if getattr(spec, "adapter", None) else ""
        out[judge.name] = f"{Path(spec.model).name}{adapter} ({spec.kind})"
    return out


def prompts_line(counts: dict[str, int]) -> str:
    """The data part of the provenance line, with the shortfall when fewer were evaluated than asked."""
    text = (
        f"{counts['evaluated']} held-out (topic, student, answer) prompts: {counts['recorded']} recorded (DPO eval "
        f"split and generated pairs not in the train split), {counts['new']} new (topics and student answers "
        "written for the evaluation)"
    )
    if counts.get("without_profile"):
        text += f"; {counts['without_profile']} recorded without a student profile left out (a team system runs)"
    if counts["evaluated"] < counts["requested"]:
        text += f"; shortfall: {counts['requested']} requested, {counts['evaluated']} evaluated"
    return text


async def evaluate_tutoring(
    ram2c: Ram2cConfig,
    ev: EvaluateConfig,
    *,
    root: Path,
    kb: tuple | None = None,
    backends: dict | None = None,
    retriever=None,
) -> dict[str, Any]:
    """Run the tutoring evaluation (see the module docstring); returns ``{"section", "deltas", "specs"}``.
    ``kb``: the ``(build_kb, retrieval)`` sections a team system's retrieval reads; ``backends``
    (built backends by :func:`pipelines.llm.client.backend_key`) and ``retriever`` replace those the config names."""
    cfg = ev.tutoring
    adapter = (
        adapter_under_test(cfg.tuned_backend, root / ev.dpo_adapter, method="dpo") if TUNED in cfg.compared() else None
    )
    llm_cfg = tutoring_llm(ram2c, cfg, adapter)
    out = root / ev.outputs.traces_dir / "tutoring"
    runtime = LLMRuntime(llm_cfg, backends=backends)
    judges_runtime = LLMRuntime(cfg.judge_llm, backends=backends) if cfg.judge_llm is not None else runtime
    pairs = cfg.comparisons.pairs()
    models_of_judges = judge_models(cfg, llm_cfg)
    try:
        await runtime.preflight()  # every backend of the run, before any call
        if judges_runtime is not runtime:
            await judges_runtime.preflight()
        prompts, counts = await evaluation_prompts(
            cfg, ram2c, runtime, root=root, data_card=Path(ev.data_card), folder=out, progress=ev.progress
        )
        write_jsonl_atomic(out / "prompts.jsonl", [p.to_row() for p in prompts])
        teams = open_teams(ram2c, cfg, runtime, root=root, kb=kb, retriever=retriever)
        answered = await answer_systems(prompts, runtime, ram2c, cfg, out=out, teams=teams, progress=ev.progress)
        items = {pair: comparison_items(prompts, answered, pair) for pair in pairs}
        judging = {
            comparison_key(*pair): judge_comparison(
                items[pair], judges_runtime, cfg, key=comparison_key(*pair), out=out, progress=ev.progress
            )
            for pair in pairs
        }  # every comparison at once: the judges' calls share the judge model's batches
        judged = dict(zip(pairs, (await run_together(judging)).values(), strict=True))
    finally:
        await runtime.close()
        if judges_runtime is not runtime:
            await judges_runtime.close()
    score_comparisons(judged, cfg, min_items=ev.bootstrap.min_items, models=models_of_judges)
    base_model = Path(llm_cfg.default.model).name
    tuned_name = tuned_model_name(cfg.tuned_backend, base_model, ev.dpo_adapter)
    names = dict(tuned_name=tuned_name, base_model=base_model)
    labels = {n: system_label(n, cfg, **names) for n in cfg.compared()}
    models = {n: system_models(n, cfg, ram2c, **names) for n in cfg.compared()}
    described = {pair: f"{models[pair[0]]} vs {models[pair[1]]}" for pair in pairs}
    raters = raters_line(models_of_judges)
    head = prompts_line(counts) + "; replies as the RAM2C drafter, judged pairwise per dimension"
    tables = hts_tables(cfg, judged, labels, described, raters=raters, head=head)
    deltas = [
        row
        for pair in pairs
        if pair[0] == TUNED
        for row in dimension_deltas(
            [j for j in judged[pair]["judgments"] if j.judge not in judged[pair]["withheld"]], ev, pair
        )
    ]
    human = None
    if cfg.human is not None:
        scoring = {
            "resamples": cfg.hts.resamples,
            "seed": cfg.hts.seed,
            "confidence": cfg.hts.confidence,
            "min_items": ev.bootstrap.min_items,
        }
        human = write_human_pack(
            cfg.human,
            items,
            labels=labels,
            tables=cfg.comparisons.by_table(),
            root=root,
            dimensions=cfg.hts.dimensions,
            language=cfg.human.language or ram2c.language,
            scoring=scoring,
            passages={p.id: p.passage for p in prompts if p.passage},
        )
    hts = {
        "tables": tables,
        "judges": [j.name for j in cfg.hts.judges],
        "raters": raters,
        "provenance": head,
    }
    section = {
        "hts": hts,
        "n": len({i.id for pair_items in items.values() for i in pair_items}),
        "prompts": counts,
        "failed_replies": {n: len(prompts) - len(answered[n]) for n in answered},
        "systems": {n: {"label": labels[n], "models": models[n], "replies": len(answered[n])} for n in answered},
        "comparisons": {
            comparison_key(*p): {
                "system": p[0],
                "baseline": p[1],
                "n": len(items[p]),
                "unscored": judged[p]["failures"]["unscored"],
                "ties": judged[p]["ties"]["ties"],
                "withheld": judged[p]["withheld"],
            }
            for p in pairs
        },
        "human": human,
    }
    specs = [llm_cfg.default, *llm_cfg.roles.values()]
    if cfg.judge_llm is not None:
        specs += [cfg.judge_llm.default, *(s for s in cfg.judge_llm.roles.values() if hasattr(s, "kind"))]
    return {"section": section, "deltas": deltas, "specs": specs}
