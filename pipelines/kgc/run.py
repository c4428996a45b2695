"""Stage ``generate_kgc`` as one function: read the datasets, draw the seeded samples, run the
chosen systems (CooperKGC and the baselines, each at every ``shots`` entry) over the same sentences
through the generation harness, score them, and write the reports.

Outputs (``outputs.generated_dir``): ``predictions.jsonl`` (one row per sentence: gold and every
system's items, per round for CooperKGC), ``traces.jsonl`` (every expert call of every round;
streamed), ``sft.jsonl``; (``outputs.reports_dir``): ``usage.json``, ``failures.json``,
``table.md`` (Table 2 layout), ``per_type.md``, ``rounds.png`` and ``rounds.csv`` (F1 per round),
``datasets.json`` (sources read or left out, reader counts per file). The stage writes
``metrics.json`` (the returned metrics).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from pipelines.agents import SampleTrace, to_jsonable
from pipelines.agents.generation import run_runtime
from pipelines.agents.harness import GenerationOutputs, HarnessReport, System, run_systems
from pipelines.agents.shards import params_fingerprint, roundtrip, write_manifest
from pipelines.io import read_jsonl, write_json_atomic
from pipelines.kgc.baselines.autokg import AutoKG
from pipelines.kgc.baselines.chatie import ChatIE
from pipelines.kgc.baselines.coter import CoTER
from pipelines.kgc.baselines.self_consistency import SelfConsistency
from pipelines.kgc.config import KGCConfig
from pipelines.kgc.datasets import load_dataset, split_sample
from pipelines.kgc.demo_cache import DemoVectorCache, default_folder
from pipelines.kgc.demos import DemoSelector
from pipelines.kgc.report import score_systems, write_reports
from pipelines.kgc.schema import SCHEMA_DIR, Schema, Sentence, load_schema
from pipelines.kgc.scoring import corrections, score_sentence
from pipelines.kgc.sft import sft_row_for
from pipelines.kgc.team import CooperKGC, TeamResult
from pipelines.llm.client import LLMRuntime
from pipelines.retrieval.config import EmbedderConfig
from pipelines.retrieval.embedder_choice import build_embedder
from pipelines.retrieval.embedders import Embedder
from pipelines.retrieval.onnx_embedder import exported_identity

log = logging.getLogger(__name__)


def read_data(
    cfg: KGCConfig, root: Path, *, exclude_ids: Collection[str] = ()
) -> tuple[list[Sentence], dict[str, list[Sentence]], dict[str, Schema], dict]:
    """``(evaluated sentences, pools by dataset, schemas by name, data summary)``; sentences whose
    id is in ``exclude_ids`` (e.g. those that gave SFT rows) are never sampled for evaluation."""
    evaluated, pools, summary = [], {}, {"datasets": {}, "left_out": []}
    schemas = {p.stem: load_schema(p.stem) for p in sorted(SCHEMA_DIR.glob("*.json"))}
    for entry in cfg.datasets:
        resolved = entry.resolved(root)
        if resolved is None:
            summary["left_out"].append({"name": entry.name, "files": entry.files})
            log.info("kgc: dataset %s left out (optional; %s not found)", entry.name, ", ".join(entry.files))
            continue
        dataset = load_dataset(resolved, root)
        if resolved.evaluate:
            candidates = [s for s in dataset.sentences if s.id not in exclude_ids] if exclude_ids else dataset.sentences
            sample, rest = split_sample(candidates, resolved.sample, seed=resolved.seed)
        else:
            sample, rest = [], dataset.sentences
        pools[entry.name] = load_dataset(resolved, root, pool=True).sentences if resolved.pool_files else rest
        schemas[entry.name] = dataset.schema
        evaluated.extend(sample)
        summary["datasets"][entry.name] = {
            "task": dataset.task,
            "language": dataset.language,
            "files": [f.to_dict() for f in dataset.files],
            "fallback": resolved.files != entry.files,
            "evaluated": len(sample),
            "pool": len(pools[entry.name]),
        }
        log.info(
            "kgc: %s: %d sentences read from %s, %d evaluated",
            entry.name,
            len(dataset.sentences),
            ", ".join(resolved.files),
            len(sample),
        )
    return evaluated, pools, schemas, summary


def document_encoder(embedder_cfg: EmbedderConfig) -> tuple[str, Callable[[list[str]], Any]]:
    """The embedder's identity and its document encoder (texts -> vectors). An exported ONNX
    embedder whose identity is known without loading it (:func:`exported_identity`) is loaded at
    its first encode: a run or shard whose vectors are all cached never loads it."""
    identity = None
    if embedder_cfg.kind == "sentence_transformers" and embedder_cfg.backend == "onnx":
        identity = exported_identity(embedder_cfg)
    if identity is None:
        embedder = build_embedder(embedder_cfg)
        return embedder.identity, lambda texts: embedder.encode_documents(texts).dense
    loaded: list[Embedder] = []

    def encode(texts: list[str]) -> Any:
        if not loaded:
            loaded.append(build_embedder(embedder_cfg))
            if loaded[0].identity != identity:  # the cache's key names another length than the model's
                log.warning("kgc: embedder identity %s, worked out as %s", loaded[0].identity, identity)
        return loaded[0].encode_documents(texts).dense

    return identity, encode


def make_selector(
    cfg: KGCConfig, pools: dict[str, list[Sentence]], evaluated: list[Sentence], root: Path
) -> DemoSelector | None:
    """The demonstration selector when some run has shots > 0 (embeds pools and sentences once)."""
    if max(cfg.shots) == 0:
        return None
    identity, embed = document_encoder(cfg.embedder.model_copy(update={"path": str(root / cfg.embedder.path)}))
    folder = root / Path(cfg.demo_cache).expanduser() if cfg.demo_cache else default_folder()  # relative: to root
    cache = DemoVectorCache(folder, identity=identity)
    selector = DemoSelector(pools, embed, cache=cache)
    selector.prepare([s.text for s in evaluated])
    return selector


def build_systems(cfg: KGCConfig, runtime: LLMRuntime, schemas, selector, languages) -> list[System]:
    """One harness System per method and shot count (self-consistency: once, 0-shot)."""
    sampling = {
        "max_attempts": cfg.team.max_attempts,
        "retry_temperature": cfg.team.retry_temperature,
        "spans": cfg.spans,
    }
    systems = []
    for method in cfg.systems:
        for shots in [0] if method == "self_consistency" else cfg.shots:
            name = f"{method}@{shots}shot"
            if method == "cooperkgc":
                team = CooperKGC(
                    runtime.for_role,
                    cfg.team,
                    schemas,
                    selector=selector,
                    shots=shots,
                    mode=cfg.output_mode,
                    languages=languages,
                    spans=cfg.spans,
                )
                systems.append(
                    System(
                        name,
                        team_worker(team),
                        prediction=_team_prediction,
                        failed_subtasks=lambda r: r.failed if r else 1,
                    )
                )
                continue
            if method == "autokg":
                runner: Any = AutoKG(
                    runtime.for_role,
                    schemas,
                    shots=shots,
                    selector=selector,
                    mode=cfg.output_mode,
                    bounds=cfg.team.bounds,
                    type_names=cfg.output_mode == "json" and cfg.team.json_types == "names",
                    **sampling,
                )
            elif method == "chatie":
                runner = ChatIE(runtime.for_role, schemas, mode=cfg.output_mode, **sampling)
            elif method == "coter":
                runner = CoTER(runtime.for_role, schemas, mode=cfg.output_mode, **sampling)
            else:
                sc = cfg.self_consistency
                runner = SelfConsistency(
                    runtime.for_role,
                    schemas,
                    k=sc.k,
                    temperature=sc.temperature,
                    via=sc.via,
                    mode=cfg.output_mode,
                    max_attempts=cfg.team.max_attempts,
                    spans=cfg.spans,
                )
            systems.append(
                System(
                    name,
                    runner.run,
                    prediction=lambda r: {"rounds": [r.items]} if r else None,
                    failed_subtasks=lambda r: r.failed if r else 1,
                )
            )
    return systems


def team_worker(team: CooperKGC):
    async def worker(sentence: Sentence, trace: SampleTrace) -> TeamResult:
        result = await team.run(sentence, trace)
        peers = [[a.replica for name, a in r.items() if name != result.primary] for r in result.rounds]
        result.corrections = corrections(sentence.task, sentence.gold(), result.items_per_round(), peers)
        final = score_sentence(sentence, result.final.items)["overall"]
        result.final_f1 = final["f1"]
        exact = final["tp"] == final["pred"] == final["gold"]
        trace.add_result(
            "team",
            "final",
            result={"final": result.final.replica, "corrections": result.corrections, "sentence_f1": final["f1"]},
            ok=result.failed == 0,
            outcome="failed" if result.failed else ("correct" if exact else "wrong"),  # read by the trace browser
        )
        return result

    return worker


def _team_prediction(result: TeamResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {"rounds": result.items_per_round(), "corrections": result.corrections, "failed": result.failed}


async def generate_kgc_async(
    cfg: KGCConfig, root: Path | str = ".", runtime: LLMRuntime | None = None, *, exclude_ids: Collection[str] = ()
) -> dict[str, Any]:
    """Run the stage; a runtime passed in is used and left open, one made here is closed.
    ``exclude_ids``: sentence ids never evaluated (the evaluate stage's held-out run)."""
    async with run_runtime(cfg.llm, runtime) as runtime:
        return await _generate(cfg, Path(root), runtime, exclude_ids=frozenset(exclude_ids))


def prediction_row(s: Sentence, preds: dict[str, Any]) -> dict[str, Any]:
    """The predictions.jsonl row of a sentence: its gold and every system's items."""
    return {
        "id": s.id,
        "dataset": s.dataset,
        "task": s.task,
        "language": s.language,
        "text": s.text,
        "matching": s.matching,
        "gold": to_jsonable(s.gold()),
        "predictions": to_jsonable(preds),
    }


def sft_export(cfg: KGCConfig, teacher: str):
    """The ``sft.jsonl`` exporter: CooperKGC's final answer at the first ``shots`` entry, when it
    qualifies (``kgc.sft``; the team worker scored it)."""
    sft_system = f"cooperkgc@{cfg.shots[0]}shot"

    def sft(s: Sentence, results: dict[str, Any]) -> list[dict[str, Any]]:
        result = results.get(sft_system)
        if result is None:
            return []
        row = sft_row_for(
            s, result, min_f1=cfg.sft.min_f1, keep=cfg.sft.keep, f1=result.final_f1, mode=cfg.output_mode, model=teacher
        )
        return [row] if row is not None else []

    return sft


async def _generate(
    cfg: KGCConfig, root: Path, runtime: LLMRuntime, *, exclude_ids: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Read and sample the sentences, build the systems, run them on the harness, then the metrics
    (and, for a shard, its manifest)."""
    evaluated, pools, schemas, data = read_data(cfg, root, exclude_ids=exclude_ids)
    await runtime.preflight(schema=cfg.output_mode == "json")
    selector = make_selector(cfg, pools, evaluated, root)
    systems = build_systems(cfg, runtime, schemas, selector, {s.language for s in evaluated})
    outputs = cfg.shard.outputs(cfg.outputs, root)
    report = await run_systems(
        evaluated,
        systems,
        accounting=runtime.accounting,
        outputs=outputs,
        sample_id=lambda s: s.id,
        prediction_row=prediction_row,
        exports={"sft.jsonl": sft_export(cfg, runtime.spec_for("ner_expert").model)},
        desc="kgc",
        shard=cfg.shard,
        **cfg.harness_options(),
    )
    context = {"data": data}
    metrics = finish_kgc(cfg, outputs, report, context=roundtrip(context), counters={})
    write_manifest(cfg.shard, outputs, report, fingerprint=params_fingerprint(cfg), context=context)
    return metrics


def sft_f1_zero(path: Path) -> int:
    """SFT rows whose final answer scored sentence F1 0 (``meta.f1``), e.g. an empty answer to empty gold."""
    return sum(1 for row in (read_jsonl(path) if path.exists() else []) if (row.get("meta") or {}).get("f1") == 0)


def finish_kgc(
    cfg: KGCConfig, outputs: GenerationOutputs, report: HarnessReport, *, context: dict, counters: dict
) -> dict[str, Any]:
    """Scores from ``<generated_dir>/predictions.jsonl`` and the harness counts, ``context["data"]``
    (the datasets read); writes ``datasets.json`` and the report files. A run and the shard merge
    both call it; a shard (``cfg.shard`` active) writes no ``rounds.png``, which the merge draws."""
    rows = read_jsonl(Path(outputs.generated_dir) / "predictions.jsonl")
    data = context["data"]
    reports_dir = Path(outputs.reports_dir)
    write_json_atomic(reports_dir / "datasets.json", data)
    scores = score_systems(rows, report)
    metrics = {
        "n_evaluated": len(rows),
        "output_mode": cfg.output_mode,
        "rounds": cfg.team.rounds,
        "datasets": {name: {k: v for k, v in d.items() if k != "files"} for name, d in data["datasets"].items()},
        "left_out": [d["name"] for d in data["left_out"]],
        "sft_rows": report.written.get("sft.jsonl", 0),
        "sft_f1_zero": sft_f1_zero(Path(outputs.generated_dir) / "sft.jsonl"),
        "failed_samples": report.failed_samples,
        "systems": scores,
    }
    write_reports(reports_dir, metrics, data, plot=not cfg.shard.active)
    return metrics


def generate_kgc(cfg: KGCConfig, root: Path | str = ".", runtime: LLMRuntime | None = None) -> dict[str, Any]:
    """Run the stage; returns the metrics (the stage writes them to ``<reports_dir>/metrics.json``)."""
    return asyncio.run(generate_kgc_async(cfg, root, runtime))
