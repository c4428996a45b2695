"""Stage ``generate_tagging`` as one function: read pairs, split them into a generation split and
a held-out evaluation split, run the chosen systems (team, single LLM, embedding similarity, PLM
fine-tuning) on the evaluation split through the generation harness, run the team on the
generation split too (its right verdicts become SFT rows), and write predictions, traces, SFT
rows, the split, the usage, the Table-4-style table and a plot.

Demonstrations, the planner's examples, the embedding threshold and the PLM come from the
generation split only. A failed sample (crashed, unparsed, or a team verdict that hangs on a
failed sub-task) is predicted ``null`` and scored by ``failure_outcome`` beside a coverage column.

Outputs (``outputs.generated_dir`` / ``outputs.reports_dir``): ``predictions.jsonl`` (one row per
pair run, with its ``split``; evaluation rows carry every system's verdict, generation rows the
team's), ``traces.jsonl`` (every agent call; streamed), ``sft.jsonl`` (generation split only,
``meta.split``), ``split.json`` (how the rows were split and both splits' ids, for the data
card); ``usage.json``, ``failures.json``, ``table.md``, ``metrics.png``. The stage writes
``metrics.json`` (the returned metrics).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.agents.generation import run_runtime
from pipelines.agents.harness import System, run_systems
from pipelines.agents.shards import params_fingerprint, roundtrip, write_manifest
from pipelines.io import write_json_atomic
from pipelines.llm.client import LLMRuntime
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.agents.worked_examples import PlannerExamples, SemanticExamples
from pipelines.tagging.backbones import Size, backbones, check_runtime, runtime_config, sizes, system_names
from pipelines.tagging.baselines import embedding as embedding_baseline
from pipelines.tagging.baselines import plm as plm_baseline
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.data import TaggingExample, limit_examples, read_examples
from pipelines.tagging.results import finish_tagging
from pipelines.tagging.sft import sft_row_for
from pipelines.tagging.split import Demonstrations, Split, build_demonstrations, split_examples
from pipelines.tagging.team import TaggingTeam, TeamVerdict, cap_to_schema

__all__ = ["finish_tagging", "generate_tagging", "generate_tagging_async"]

log = logging.getLogger(__name__)
LLM_SYSTEMS = ("team", "single_llm")
SKIPPED = object()  # a system that does not run on a generation-split sample


@dataclass
class Sample:
    """One pair the harness runs, with the split it belongs to."""

    example: TaggingExample
    split: str  # "evaluation" | "generation"

    @property
    def id(self) -> str:
        return self.example.id


def demo_vars(demos: list[TaggingExample], definition: str) -> list[dict[str, Any]]:
    """The single LLM's demonstrations (a demonstration of another concept shows its definition)."""
    out = []
    for d in demos:
        row = {"question": d.question, "label": d.label, "rationale": d.rationale}
        if d.definition != definition:
            row["definition"] = d.definition
        out.append(row)
    return out


def team_prediction(verdict: TeamVerdict | None) -> int | None:
    if verdict is SKIPPED:
        return None
    return int(verdict.verdict) if verdict is not None and verdict.answered else None


@dataclass
class Shown:
    """What the LLM systems are shown besides the pair: demonstrations and worked examples."""

    demos: Demonstrations
    planner: PlannerExamples
    semantic: SemanticExamples


def team_system(runtime: LLMRuntime, cfg: TaggingConfig, shown: Shown, size: Size) -> System:
    """The multi-agent team (on both splits for the first size, on the evaluation split for the
    others); its aggregate verdict is traced as a non-LLM step."""
    team = TaggingTeam(
        lambda role: runtime.for_role(size.role(role)),
        cfg.team,
        shown.demos,
        mode=cfg.output_mode,
        planner_examples=shown.planner,
        semantic_pairs=shown.semantic,
    )

    async def worker(sample: Sample, trace: SampleTrace) -> TeamVerdict:
        if size.suffix and sample.split != "evaluation":
            return SKIPPED
        verdict = await team.tag(sample.example, trace)
        correct = bool(verdict.verdict) == bool(sample.example.label)
        trace.add_result(
            "team",
            "aggregate",
            result=verdict,
            ok=verdict.failures == 0,
            label=sample.example.label,
            split=sample.split,
            answered=verdict.answered,
            outcome=("correct" if correct else "wrong") if verdict.answered else "failed",  # read by the trace browser
        )
        return verdict

    system = System(
        size.system("team"),
        worker,
        prediction=team_prediction,
        failed_subtasks=lambda v: 0 if v is SKIPPED else (v.failures if v is not None else 1),
    )
    system.team = team  # its counters are read after the run
    return system


def single_llm_system(runtime: LLMRuntime, cfg: TaggingConfig, shown: Shown, size: Size) -> System:
    """The few-shot single-LLM baseline on the evaluation split (None for a reply that never parsed)."""
    agent = make_single_llm(max_attempts=cfg.team.max_attempts, retry_temperature=cfg.team.retry_temperature)
    if cfg.output_mode == "json":
        cap_to_schema(agent)
    llm = runtime.for_role(size.role(agent.role))

    async def worker(sample: Sample, trace: SampleTrace) -> bool | None:
        if sample.split != "evaluation":
            return SKIPPED
        example = sample.example
        vars = {
            "definition": example.definition,
            "question": example.question,
            "demonstrations": demo_vars(shown.demos.for_example(example), example.definition),
            "language": example.language,
        }
        record = await agent.run(llm, vars, tag="tag", mode=cfg.output_mode)
        trace.add(record)
        return record.parsed.verdict if record.ok else None

    return System(
        size.system("single_llm"),
        worker,
        prediction=lambda v: None if v is None or v is SKIPPED else int(v),
        failed_subtasks=lambda v: int(v is None),
    )


def baseline_predictions(cfg: TaggingConfig, root: Path, embed, evaluation, split):
    """Predictions and details (threshold and its source, or K; chosen learning rate and sweep) of
    the non-LLM systems, trained on the generation split, in ``cfg.systems`` order."""
    out: dict[str, list[int]] = {}
    details: dict[str, dict[str, Any]] = {}
    for system in cfg.systems:
        if system == "embedding":
            preds, _, info = embedding_baseline.predict(
                cfg.embedding, embed, evaluation, split.generation, candidates=split.evaluation
            )
            log.info("embedding baseline: %s", info["source"])
            out[system], details[system] = preds, info
        elif system == "plm":
            plm_cfg = cfg.plm.model_copy(update={"model": str(root / cfg.plm.model)})
            out[system], _, details[system] = plm_baseline.train_and_predict(plm_cfg, split.generation, evaluation)
    return out, details


async def generate_tagging_async(cfg: TaggingConfig, root: Path | str = ".", runtime: LLMRuntime | None = None):
    """Run the stage; a runtime passed in is used and left open, one made here is closed (with
    ``tagging.sizes``, a runtime passed in must come from :func:`pipelines.tagging.backbones.runtime_config`)."""
    async with run_runtime(runtime_config(cfg), runtime) as runtime:
        check_runtime(cfg, runtime)
        return await _generate(cfg, Path(root), runtime)


def _embedders(cfg: TaggingConfig, root: Path):
    """(baseline embedder, demonstration embedder): each loaded only when needed, once per folder."""
    loaded: dict[str, Any] = {}

    def load(model: str):
        if model not in loaded:
            loaded[model] = embedding_baseline.load_embedder(root / model, cfg.embedding.batch_size)
        return loaded[model]

    baseline = load(cfg.embedding.model) if "embedding" in cfg.systems else None
    demos = load(cfg.demos.embedding_model) if cfg.demos.strategy == "nearest" else None
    return baseline, demos


@dataclass
class Pairs:
    """The pairs a run reads and which of them it runs: the evaluated ones and the generation-split
    ones the team runs for SFT rows."""

    examples: list[TaggingExample]
    split: Split
    evaluation: list[TaggingExample]
    generation_run: list[TaggingExample]

    def samples(self) -> list[Sample]:
        return [Sample(e, "evaluation") for e in self.evaluation] + [
            Sample(e, "generation") for e in self.generation_run
        ]


def read_pairs(cfg: TaggingConfig, root: Path, *, team_runs: bool) -> Pairs:
    """Read the pairs, split them, and draw the evaluated and (when the team runs) generation samples."""
    examples = read_examples(cfg.data, root)
    split = split_examples(examples, cfg.split)
    evaluation = limit_examples(split.evaluation, cfg.data.limit, cfg.data.seed)
    generation_run = limit_examples(split.generation, cfg.split.generation_limit, cfg.split.seed) if team_runs else []
    return Pairs(examples, split, evaluation, generation_run)


def shown_examples(cfg: TaggingConfig, root: Path, *, split: Split, demo_embed) -> Shown:
    """The demonstrations and worked examples, from the generation split only."""
    chooser = {"strategy": cfg.demos.strategy, "seed": cfg.demos.seed, "embed": demo_embed}
    return Shown(
        build_demonstrations(split.generation, cfg.demos, root=root, embed=demo_embed, held_out=split.evaluation),
        PlannerExamples(k=cfg.demos.k, **chooser),
        SemanticExamples(**chooser),
    )


def prediction_row(sample: Sample, preds: dict[str, Any]) -> dict[str, Any]:
    """The predictions.jsonl row of a pair (a generation-split row carries the team's verdict only)."""
    e = sample.example
    if sample.split != "evaluation":
        preds = {name: value for name, value in preds.items() if name == "team"}
    return {
        "id": e.id,
        "knowledge_id": e.knowledge_id,
        "language": e.language,
        "label": e.label,
        "split": sample.split,
        "predictions": preds,
    }


def sft_export(cfg: TaggingConfig, teacher: str):
    """The ``sft.jsonl`` exporter: the team's qualifying verdicts on the generation split."""

    def sft(sample: Sample, results: dict[str, Any]) -> list[dict[str, Any]]:
        if sample.split != "generation":
            return []
        row = sft_row_for(
            sample.example,
            results.get("team"),
            require_no_failures=cfg.sft.require_no_failures,
            model=teacher,
            split=sample.split,
            split_by=cfg.split.by,
        )
        return [row] if row is not None else []

    return sft


def run_context(cfg: TaggingConfig, runtime: LLMRuntime, *, pairs: Pairs, details: dict[str, Any]) -> dict[str, Any]:
    """What finish_tagging needs that is not per sample (the same in every shard)."""
    record = pairs.split.record()
    return {
        "n_pairs": len(pairs.examples),
        "split": {k: v for k, v in record.items() if k != "ids"},
        "n_demonstration_pool": len(pairs.split.generation),
        "details": details,
        "backbones": backbones(cfg, runtime),
    }


def team_counters(systems: list[System]) -> dict[str, Any]:
    """Per team system: its plan truncation and numerical counters (they add up over shards)."""
    return {
        s.name: {"plan_truncation": s.team.truncation(), "numerical": s.team.numerical()}
        for s in systems
        if hasattr(s, "team")
    }


async def _generate(cfg: TaggingConfig, root: Path, runtime: LLMRuntime) -> dict[str, Any]:
    """Read and split the pairs, train the non-LLM baselines, run the LLM systems on the harness,
    then the metrics (and, for a shard, its manifest)."""
    llm_systems = [s for s in cfg.systems if s in LLM_SYSTEMS]
    if llm_systems:
        await runtime.preflight(schema=cfg.output_mode == "json")
    pairs = read_pairs(cfg, root, team_runs="team" in llm_systems)
    split = pairs.split
    embed, demo_embed = _embedders(cfg, root)
    shown = shown_examples(cfg, root, split=split, demo_embed=demo_embed)
    log.info(
        "tagging: %d pairs read; split by %s: %d generation (%d run by the team for SFT), %d evaluation (%d evaluated)",
        len(pairs.examples),
        cfg.split.by,
        len(split.generation),
        len(pairs.generation_run),
        len(split.evaluation),
        len(pairs.evaluation),
    )
    outputs = cfg.shard.outputs(cfg.outputs, root)
    write_json_atomic(Path(outputs.generated_dir) / "split.json", split.record())
    fixed, details = baseline_predictions(cfg, root, embed, pairs.evaluation, split)
    padded = {name: list(values) + [None] * len(pairs.generation_run) for name, values in fixed.items()}
    makers = {"team": team_system, "single_llm": single_llm_system}
    systems = [makers[name](runtime, cfg, shown, size) for size in sizes(cfg) for name in llm_systems]
    teacher = runtime.spec_for("semantic_judge").model if "team" in llm_systems else ""
    report = await run_systems(
        pairs.samples(),
        systems,
        accounting=runtime.accounting,
        outputs=outputs,
        sample_id=lambda s: s.id,
        prediction_row=prediction_row,
        exports={"sft.jsonl": sft_export(cfg, teacher)},
        fixed_predictions=padded,
        order=system_names(cfg),
        desc="tagging",
        shard=cfg.shard,
        shard_group=lambda s: (s.example.definition, s.example.language),  # the team plans once per concept
        **cfg.harness_options(),
    )
    context, counters = run_context(cfg, runtime, pairs=pairs, details=details), team_counters(systems)
    metrics = finish_tagging(cfg, outputs, report, context=roundtrip(context), counters=roundtrip(counters))
    write_manifest(
        cfg.shard,
        outputs,
        report,
        fingerprint=params_fingerprint(cfg),
        context=context,
        counters=counters,
        shared=["=generated:split.json"],
    )
    return metrics


def generate_tagging(cfg: TaggingConfig, root: Path | str = ".", runtime: LLMRuntime | None = None) -> dict[str, Any]:
    """Run the stage; returns the metrics (the stage writes them to ``<reports_dir>/metrics.json``)."""
    return asyncio.run(generate_tagging_async(cfg, root, runtime))
