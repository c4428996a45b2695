"""Each stage's own ``metrics.json`` mapped into the sections :func:`summary.write_summary` takes
(shapes: :mod:`pipelines.reporting.tables`), with a provenance line built from the
metrics and the generating models named in params.

Inputs (the keys each stage really writes):

- ``generate_tagging``: ``{"n_pairs", "split": {"by", "counts", ...}, "n_evaluated", "systems":
  {system: {"overall": {accuracy, precision, recall, f1, ...}, "backbone", ...}}, ...}``
- ``generate_kgc``: ``{"n_evaluated", "output_mode", "rounds", "datasets": {name: {"task",
  "language", "fallback", "evaluated", "pool"}}, "systems": {"<method>@<k>shot": {"datasets":
  {name: {"task", "matching", "overall": {"f1", ...}, "f1_per_round": [...], "trigger"?, "argument"?}},
  ...}}}`` and ``rounds.csv``
  (``system, dataset, round, f1``)
- ``generate_ram2c``: ``{"books", "passages", "dialogues", "turns", "pairs_kept", "pairs_dropped",
  "dropped_by_reason", "groups_run", "experts_per_group", "selection", "groups": {name: {...}},
  "llm_calls_per_dialogue", "tokens_per_dialogue", "mean_chars_chosen", "mean_chars_rejected"}``
- ``train/<run>``: ``metrics.json`` (``train_loss``, ``global_step``, ...) and ``loss.csv``
  (``step, loss, accuracy``)
- ``evaluate``: ``{"offline_default", "tagging" / "kgc": {"base", "tuned", "n", "provenance"},
  "tutoring": {"hts", "n"}, "deltas", "deltas_provenance"}``
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.kgc.table2 import matching_note, system_label, table2
from pipelines.llm.config import LLMConfig, RoleSamplingConfig
from pipelines.llm.shared import inherit, shared_section
from pipelines.models.prepare import PrepareModelsConfig


def _short(model: str) -> str:
    return Path(str(model)).name or str(model)


def backend_specs(params: Mapping[str, Any], section: str) -> list[Any]:
    """Every backend spec (default and per-role) of ``params[section]["llm"]``, with what it inherits
    from the top-level ``llm``; [] without one."""
    raw = (params.get(section) or {}).get("llm")
    if raw is None and section in params and shared_section(dict(params)) is not None:
        raw = {}
    if raw is None:
        return []
    shared = shared_section(dict(params))
    llm = LLMConfig.model_validate(inherit(raw, shared) if shared is not None else raw)
    return [llm.default, *[r for r in llm.roles.values() if not isinstance(r, RoleSamplingConfig)]]


def models_named(params: Mapping[str, Any], section: str) -> str:
    """``smollm2-135m-instruct (transformers)``, or several joined, for a section's provenance."""
    names = dict.fromkeys(f"{_short(s.model)} ({s.kind})" for s in backend_specs(params, section))
    return ", ".join(names) or "not recorded in params"


def offline_default(params: Mapping[str, Any], sections: list[str]) -> bool:
    """True when every generating backend of ``sections`` is the local transformers backend on the
    chat model ``prepare_models`` writes (``prepare_models.chat_model_dir``); False when any role
    runs elsewhere (an API, vLLM, another model) or no section names a backend."""
    offline_dir = os.path.normpath(
        PrepareModelsConfig.model_validate(params.get("prepare_models") or {}).chat_model_dir
    )
    specs = [s for section in sections for s in backend_specs(params, section)]
    return bool(specs) and all(s.kind == "transformers" and os.path.normpath(s.model) == offline_dir for s in specs)


def read_rounds_csv(path: Path) -> dict[str, list[float]]:
    """``rounds.csv`` -> ``{"<system> · <dataset>": [f1 at round 0, 1, ...]}``."""
    series: dict[str, dict[int, float]] = {}
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            key = f"{system_label(row['system'])} · {row['dataset']}"
            series.setdefault(key, {})[int(row["round"])] = float(row["f1"])
    return {k: [v[r] for r in sorted(v)] for k, v in series.items()}


def kgc_demo_sets(params: Mapping[str, Any], metrics: Mapping[str, Any]) -> dict[str, str]:
    """``{dataset: its files}`` for the datasets scored on the project's own demo sentences: a
    fallback was used, or every file lies inside the project (real data is read from ../shared)."""
    demo = {}
    for entry in (params.get("kgc") or {}).get("datasets") or []:
        info = (metrics.get("datasets") or {}).get(entry.get("name")) or {}
        files = entry.get("fallback_files") if info.get("fallback") else entry.get("files")
        inside = [f for f in files or [] if not Path(f).is_absolute() and not f.startswith("..")]
        if files and (info.get("fallback") or len(inside) == len(files)):
            demo[entry["name"]] = ", ".join(files)
    return demo


def kgc_section(
    metrics: Mapping[str, Any], *, models: str, rounds_csv: Path | None = None, demo: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """CooperKGC Table 2 section (:func:`pipelines.kgc.table2.table2`): baselines, a "Single
    expert" row per CooperKGC run (round 0 of the team, each expert alone), then CooperKGC with
    its gain over AutoKG at the same shots; EE trigger and argument F1; F1 per round from
    ``rounds.csv`` when given, else from the metrics. Datasets in ``demo`` (:func:`kgc_demo_sets`)
    are labelled as the project's demo sets, not as the benchmark they imitate."""
    demo = demo or {}
    section = table2(metrics)
    for d in section["datasets"]:
        if d["name"] in demo:
            d["label"] = f"{d['name']} demo set"
    rounds: dict[str, list[float]] = {}
    for system, result in metrics["systems"].items():
        per_round = {n: d.get("f1_per_round") or [] for n, d in result["datasets"].items()}
        rounds.update({f"{system_label(system)} · {n}": v for n, v in per_round.items() if len(v) > 1})
    if rounds_csv is not None:
        rounds = read_rounds_csv(rounds_csv)
    info = metrics.get("datasets") or {}
    sources = ", ".join(
        f"{n} ({f'demo set {demo[n]}' if n in demo else 'files'}, {d.get('evaluated', '?')} sentences)"
        for n, d in info.items()
    )
    data = f"{metrics.get('n_evaluated', '?')} sentences" + (f": {sources}" if sources else "")
    detail = (
        f"strict micro-F1, {metrics.get('output_mode', '?')} mode, {metrics.get('rounds', '?')} rounds after round 0; "
        f"gold matched: {matching_note(section['matching'])}; EE: argument F1; CooperKGC's gain over AutoKG"
    )
    return {
        "datasets": section["datasets"],
        "rows": section["rows"],
        "reference": section["reference"],
        "ee": section["ee"],
        "rounds": rounds,
        "provenance": {"data": data, "models": models, "scores": detail},
        "rounds_provenance": {"data": data, "models": models, "scores": "F1 of the scored expert after each round; "
                              "round 0 = each expert alone"},
    }  # fmt: skip


def ram2c_section(metrics: Mapping[str, Any], *, models: str) -> dict[str, Any]:
    """The tutoring-dialogue generation section (:func:`report_tables.ram2c_tables`)."""
    books = ", ".join(_short(b) for b in metrics.get("books", [])) or "?"
    dialogues, turns = metrics.get("dialogues", "?"), metrics.get("turns", "?")  # turns: all dialogues' together
    known = isinstance(turns, int) and isinstance(dialogues, int) and dialogues > 0
    per = f", {turns / dialogues:g} per dialogue" if known else ""
    data = f"{dialogues} dialogues, {turns} turns in all{per}, over "
    data += f"{metrics.get('passages', '?')} passages of {books} ({metrics.get('language', '?')})"
    team = f"groups {'/'.join(metrics.get('groups_run', []))}, {metrics.get('experts_per_group', '?')} experts "
    team += f"per group, selection {metrics.get('selection', '?')}"
    return {**dict(metrics), "provenance": {"data": data, "models": models, "team": team}}


EVAL_KEYS = ("eval_loss", "eval_rewards/margins", "eval_rewards/accuracies")
"""The trainer's evaluation metrics the summary shows (DPO adds reward margin and accuracy)."""


def training_run(name: str, metrics: Mapping[str, Any], loss: list[list[float]], params: Mapping[str, Any]) -> dict:
    """One run of the training section; method and tuning from ``params.train.<name>`` when there."""
    cfg = ((params.get("train") or {}).get(name)) or {}
    method = str(cfg.get("method", name)).upper()
    tuning = {"lora": "LoRA", "qlora": "QLoRA", "full": "full"}.get(cfg.get("tuning"), cfg.get("tuning") or "")
    evaluation = {k.removeprefix("eval_"): v for k, v in metrics.items() if k in EVAL_KEYS}
    return {"method": f"{method} {tuning}".strip(), "loss": loss, "train_loss": metrics.get("train_loss"),
            "global_step": metrics.get("global_step"), "base_model": _short(cfg.get("model", "?")),
            "train_rows": metrics.get("train_rows"), "eval_rows": metrics.get("eval_rows"), "eval": evaluation,
            "probe": metrics.get("lm_head")}  # fmt: skip


def training_section(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    bases = ", ".join(dict.fromkeys(r["base_model"] for r in runs.values()))
    steps = ", ".join(f"{name} {r.get('global_step', '?')} steps" for name, r in runs.items())
    return {"runs": dict(runs), "provenance": {"data": "make_datasets splits of the generated rows (data/train)",
                                               "models": f"LoRA/full tuning of {bases}", "steps": steps}}  # fmt: skip


def evaluate_sections(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``reports/evaluate/metrics.json`` as it is: ``hts``, ``deltas`` (+ provenance) and the
    per-team ``base_tuned`` sections."""
    out: dict[str, Any] = {}
    hts = (metrics.get("tutoring") or {}).get("hts")
    if hts:
        out["hts"] = hts
    if metrics.get("deltas"):
        out["deltas"] = metrics["deltas"]
        if metrics.get("deltas_provenance"):
            out["deltas_provenance"] = metrics["deltas_provenance"]
    teams = {t: metrics[t] for t in ("tagging", "kgc") if isinstance(metrics.get(t), Mapping) and "base" in metrics[t]}
    if teams:
        out["base_tuned"] = teams
    return out
