"""The DPO adapter as the tutoring responder, against each baseline, judged pairwise (HTS).

Held-out items are (topic, student answer) prompts exactly as the RAM2C drafter saw them: the DPO
rows of ``data/train/dpo``'s eval split, plus rows of ``extra_rows`` (the generated pairs) whose
prompt is not in the train split (make_datasets splits by prompt, so these were never trained on).
Each arm answers every prompt as the drafter does (its template's parser, sampling and tag, so the
base arm's requests are those of generation). The baselines (``evaluate.tutoring.baselines``,
:mod:`pipelines.evaluation.arms.tutoring_baselines`) are the base model, a reference model, or a
reference model whose draft the RAM2C team rewrites. Per baseline, the items it and the tuned arm
both answered are judged per dimension by the HTS judges
(:func:`pipelines.evaluation.hts.config.run_judging`: positions randomised, 4/2/0 scoring, Fleiss'
kappa): one row of HTS Table 1 and one bootstrap delta per dimension each.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.agents import Runner, SampleTrace
from pipelines.evaluation.arms.config import EvaluateConfig, TutoringEvalConfig
from pipelines.evaluation.arms.tuned import adapter_under_test, check_held_out, tuned_llm_config, tuned_model_name
from pipelines.evaluation.arms.tutoring_baselines import (
    baseline_items,
    baseline_model,
    baseline_roles,
    judgment_files,
    open_team,
    provenance_line,
    row_label,
    team_refiner,
)
from pipelines.evaluation.hts.config import run_judging
from pipelines.evaluation.hts.scoring import hts_score, position_preference
from pipelines.evaluation.stats.bootstrap import delta_row
from pipelines.io import read_jsonl, write_jsonl_atomic
from pipelines.llm.client import LLMRuntime
from pipelines.llm.config import LLMConfig
from pipelines.ram2c.agents import FOLDER, ConversationAgent
from pipelines.ram2c.agents.replies import ReplyOut, parse_reply
from pipelines.ram2c.config import Ram2cConfig
from pipelines.stage import StageError
from pipelines.training.rows import RowError, normalise_row, prompt_key


class RecordedPromptAgent(ConversationAgent):
    """The drafter answering a recorded prompt: ``vars["prompt"]`` are its messages, unchanged."""

    def render(self, language: str | None = None, *, output_mode: str = "text", **vars: Any) -> list[dict]:
        self._check_mode(output_mode)
        return [{"role": m["role"], "content": m["content"]} for m in vars["prompt"]]


@dataclass(frozen=True)
class HeldOutPrompt:
    id: str
    prompt: list[dict[str, str]]
    topic: str
    answer: str
    language: str
    turn: int
    student: str | None = None  # the persona id the pair's dialogue had (meta.student)
    book: str = ""  # meta.book when recorded (the expert groups do not read it)


def _meta(row: dict[str, Any]) -> dict[str, Any]:
    meta = row.get("meta") or {}
    return json.loads(meta) if isinstance(meta, str) else meta


def held_out_prompts(cfg: TutoringEvalConfig, *, root: Path, seed: int, data_card: Path) -> list[HeldOutPrompt]:
    """The held-out prompts (see the module docstring), ``cfg.items`` of them (seeded; sorted by id)."""
    from datasets import load_from_disk

    splits = load_from_disk(str(root / cfg.dataset))
    train = list(splits["train"]) if "train" in splits else []
    evaluation = list(splits["eval"]) if "eval" in splits else []
    card = json.loads((root / data_card).read_text(encoding="utf-8"))
    recorded = card.get("counts", {}).get("dpo", {}).get("eval")
    if recorded is not None and recorded != len(evaluation):
        raise StageError(
            f"{data_card} records {recorded} DPO eval rows, {cfg.dataset} has {len(evaluation)}; rerun make_datasets"
        )
    candidates = evaluation
    if cfg.extra_rows and (root / cfg.extra_rows).exists():
        for row in read_jsonl(root / cfg.extra_rows):
            try:
                candidates.append(normalise_row(row, "dpo", "ram2c"))
            except RowError:
                continue
    trained_prompts = {prompt_key(r) for r in train}
    chosen: dict[str, dict[str, Any]] = {}
    for row in candidates:
        if prompt_key(row) not in trained_prompts and row["id"] not in chosen:
            chosen[row["id"]] = row
    ids = sorted(chosen)
    if cfg.items is not None and cfg.items < len(ids):
        ids = sorted(random.Random(seed).sample(ids, cfg.items))
    check_held_out(ids, {r["id"] for r in train}, system="tutoring", where=f"DPO eval split of {cfg.dataset}")
    prompts = []
    for row_id in ids:
        row, meta = chosen[row_id], _meta(chosen[row_id])
        answer = next(m["content"] for m in reversed(row["prompt"]) if m["role"] == "user")
        # a row without a recorded topic (e.g. a hand-written pair): the judges see its system prompt,
        # the context the responder answered in
        system = next((m["content"] for m in row["prompt"] if m["role"] == "system"), "")
        topic = str(meta.get("topic") or system)
        language, turn = meta.get("language", "en"), int(meta.get("turn", 1))
        prompts.append(
            HeldOutPrompt(
                row_id, row["prompt"], topic, answer, language, turn, meta.get("student"), str(meta.get("book", ""))
            )
        )
    return prompts


def responder(ram2c: Ram2cConfig) -> RecordedPromptAgent:
    """The drafter agent as the generation stage builds it (parser, schema, attempts, max tokens)."""
    return RecordedPromptAgent(
        "drafter",
        FOLDER,
        parse_reply,
        output=ReplyOut,
        max_tokens=ram2c.max_tokens.get("drafter"),
        max_attempts=ram2c.max_attempts,
        retry_temperature=ram2c.retry_temperature,
    )


async def replies(
    prompts, llm, agent, ram2c: Ram2cConfig, *, arm: str, folder: Path, progress: bool, refine=None
) -> dict[str, str]:
    """``{prompt id: reply}`` of one arm (failed ones left out); its traces go to ``folder/<arm>/traces.jsonl``.
    ``refine(prompt, draft, trace)`` (a reference_team baseline) turns each draft into the reply."""

    async def worker(p: HeldOutPrompt, trace: SampleTrace) -> str | None:
        record = await agent.run(
            llm, {"prompt": p.prompt, "language": p.language}, tag=f"drafter/{p.turn}", mode=ram2c.output_mode
        )
        trace.add(record, arm=arm)
        if not record.ok:
            return None
        return record.parsed if refine is None else await refine(p, record.parsed, trace)

    report = await Runner(ram2c.concurrency, desc=f"tutoring {arm}", progress=progress).run(
        prompts, worker, sample_id=lambda p: p.id
    )
    report.write_traces(folder / arm / "traces.jsonl")
    return {p.id: r for p, r in zip(prompts, report.results, strict=True) if r}


def tutoring_llm(ram2c: Ram2cConfig, cfg: TutoringEvalConfig, adapter: str | None) -> LLMConfig:
    """One config for the run: roles ``base`` and ``tuned`` (the drafter's backend, its sampling;
    tuned with the adapter), the baselines' roles (:func:`baseline_roles`) and the judges' roles on
    the base backend unless ``judge_llm`` is set."""
    role = cfg.roles[0]
    entry = ram2c.llm.roles.get(role)
    base_spec = ram2c.llm.spec_for(role).model_copy(update={"sampling": entry.sampling if entry else None})
    tuned = tuned_llm_config(ram2c.llm, [role], adapter=adapter, backend=cfg.tuned_backend).roles[role]
    roles = {"base": base_spec, "tuned": tuned, **baseline_roles(ram2c, cfg.baselines, drafter=role)}
    if cfg.judge_llm is None:
        roles.update({r: base_spec.model_copy(update={"sampling": None}) for r in cfg.hts.roles()})
    return LLMConfig(
        default=base_spec.model_copy(update={"sampling": None}),
        roles=roles,
        cache=ram2c.llm.cache,
        sampling=ram2c.llm.sampling,
    )


def dimension_deltas(judgments, ev: EvaluateConfig, *, suffix: str = "") -> list[dict[str, Any]]:
    """Per dimension: the per-item HTS score of the tuned replies (its judges pooled) against parity
    (50), as metric ``hts_<dimension><suffix>``."""
    rows = []
    for dimension in ev.tutoring.hts.dimensions:
        by_item: dict[str, list[str]] = {}
        for j in judgments:
            if j.dimension == dimension and j.outcome is not None:
                by_item.setdefault(j.item_id, []).append(j.outcome)
        if not by_item:
            continue
        tuned = {item: hts_score(outcomes) for item, outcomes in by_item.items()}
        parity = dict.fromkeys(by_item, 50.0)
        rows.append(
            delta_row(
                tuned,
                parity,
                team="tutoring",
                system="responder",
                metric=f"hts_{dimension}{suffix}",
                scale=1.0,
                **ev.bootstrap.model_dump(),
            )
        )
    return rows


async def answer_all(prompts, runtime, ram2c: Ram2cConfig, ev: EvaluateConfig, *, root: Path, out: Path, kb, retriever):
    """``{arm: {prompt id: reply}}`` for ``tuned`` and every baseline (``base`` or its name)."""
    agent = responder(ram2c)
    baselines = {b.name: b for b in ev.tutoring.baselines}
    arms = {"base": baselines.pop("base")} if "base" in baselines else {}
    arms.update({"tuned": None, **baselines})  # base first, as without baselines
    answered = {}
    for arm, baseline in arms.items():
        refine = None
        if baseline is not None and baseline.kind == "reference_team":
            team = open_team(ram2c, baseline, runtime, root=root, kb=kb, retriever=retriever)
            refine = team_refiner(team, ram2c)
        answered[arm] = await replies(
            prompts, runtime.for_role(arm), agent, ram2c, arm=arm, folder=out, progress=ev.progress, refine=refine
        )
    return answered


async def evaluate_tutoring(
    ram2c: Ram2cConfig,
    ev: EvaluateConfig,
    *,
    root: Path,
    kb: tuple | None = None,
    backends: dict | None = None,
    retriever=None,
) -> dict[str, Any]:
    """Answer the held-out prompts with the tuned arm and every baseline and judge each baseline
    against the tuned replies; returns ``{"section", "deltas", "specs"}``. ``kb``: the ``(build_kb,
    retrieval)`` sections a reference_team baseline's retrieval reads; ``backends`` (built backends
    by :func:`pipelines.llm.client.backend_key`) and ``retriever`` replace those the config names."""
    cfg = ev.tutoring
    adapter = adapter_under_test(cfg.tuned_backend, root / ev.dpo_adapter, method="dpo")
    prompts = held_out_prompts(cfg, root=root, seed=cfg.hts.seed, data_card=Path(ev.data_card))
    llm_cfg = tutoring_llm(ram2c, cfg, adapter)
    out = root / ev.outputs.traces_dir / "tutoring"
    runtime = LLMRuntime(llm_cfg, backends=backends)
    judges_runtime = LLMRuntime(cfg.judge_llm, backends=backends) if cfg.judge_llm is not None else runtime
    judged = {}
    try:
        answered = await answer_all(prompts, runtime, ram2c, ev, root=root, out=out, kb=kb, retriever=retriever)
        items = {b.name: baseline_items(prompts, answered, b, out) for b in cfg.baselines}
        for b in cfg.baselines:
            judged[b.name] = await run_judging(items[b.name], judges_runtime, cfg.hts, progress=ev.progress)
    finally:
        await runtime.close()
        if judges_runtime is not runtime:
            await judges_runtime.close()
    base_model = Path(llm_cfg.roles["base"].model).name
    tuned_name = tuned_model_name(cfg.tuned_backend, base_model, ev.dpo_adapter)
    rows, described, deltas, baselines = {}, [], [], {}
    for b in cfg.baselines:
        judgments_file, traces_file = judgment_files(out, b)
        judged[b.name]["report"].write_traces(traces_file)
        write_jsonl_atomic(judgments_file, [j.to_row() for j in judged[b.name]["judgments"]])
        label, models = row_label(b, tuned_name=tuned_name, base_model=base_model), baseline_model(b, base_model, ram2c)
        label = f"{label} ({b.name})" if label in rows else label  # a baseline named like the base model
        rows[label] = judged[b.name]["scores"]
        described.append((label, models, len(items[b.name])))
        suffix = "" if b.name == "base" else f"_vs_{b.name}"
        deltas += dimension_deltas(judged[b.name]["judgments"], ev, suffix=suffix)
        baselines[b.name] = {"kind": b.kind, "models": models, "row": label, "n": len(items[b.name])}
    n = len({item.id for judged_items in items.values() for item in judged_items})
    judges = ", ".join(j.name for j in cfg.hts.judges)
    provenance = provenance_line(n, tuned_name, described, judges)
    every_judgment = [j for b in cfg.baselines for j in judged[b.name]["judgments"]]
    hts = {
        "tables": {"1": {"rows": rows, "provenance": provenance}},
        "position_preference": position_preference(every_judgment),
        "judges": [j.name for j in cfg.hts.judges],
        "provenance": provenance,
    }
    section = {
        "hts": hts,
        "n": n,
        "n_prompts": len(prompts),
        "failed_replies": {arm: len(prompts) - len(answered[arm]) for arm in answered},
        "baselines": baselines,
    }
    specs = [llm_cfg.roles[arm] for arm in dict.fromkeys(["base", *answered])]  # judges too, without judge_llm
    specs += [cfg.judge_llm.default] if cfg.judge_llm else []
    return {"section": section, "deltas": deltas, "specs": specs}
