"""A work folder laid out like the project, with the paper profile's params aimed at simulated
servers (the paper-scale benchmark and the Slurm tests).

``make_workspace(work)`` creates ``work/project`` whose ``data/`` inputs
and ``configs/`` link to this checkout's (outputs, caches and reports stay inside ``work``), and
``work/shared`` linking to the real public data when the checkout has ``../shared`` (the same
relative path the params use). ``paper_params(...)`` is ``configs/profiles/paper.yaml`` laid over
``params.yaml`` (through :func:`pipelines.profiles.apply_profile`, as ``--write`` does), with:

- every backend of the three teams (the top-level ``llm.default`` made each team's own), the GLM-4
  roles of RAM2C included, sent to the simulated servers (``base_urls``), no API key, ``max_retries``
  kept; :func:`served_names` lists the model names the servers must then serve;
- one request cache per team (a kill of one stage leaves the others' alone), progress bars off,
  ``llm.sampling.seed: 0`` (a sampled re-ask is then the same request in every run, so two runs,
  a sharded one and a killed-then-resumed one can be compared file by file);
- item counts scaled by ``fraction`` (1.0: the paper's: 3,500 dialogues, 100 sentences per KGC
  dataset, the whole tagging evaluation and generation splits), or per team by ``fractions``
  (``{"kgc": 0.25}``: that team's counts at 25 %, the others at ``fraction``);
- the knowledge base built with the offline embedder and its retrieval score left out
  (``build_kb.quality.enabled: false``: it is not part of generation).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from pipelines.profiles import apply_profile, load_profile

PROJECT = Path(__file__).resolve().parents[2]
TEAMS = ("tagging", "kgc", "ram2c")
LINKED = ("data/kgc", "data/ram2c", "data/tagging", "data/kb_sources", "data/kb_eval", "data/demo", "configs")
TAGGING_EVALUATION_PAIRS = 72  # the demo set's evaluation split (data/tagging/demo.jsonl, evaluation_share 0.67)
TAGGING_GENERATION_PAIRS = 36


def make_workspace(work: Path, *, shared: Path | None = None) -> Path:
    """``work/project`` (see the module docstring); returns it. Idempotent. ``shared``: the public
    data folder to link as ``work/shared`` (default: the checkout's ``../shared`` when it exists)."""
    project = work / "project"
    (project / "data").mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = project / name
        if not link.exists():
            link.symlink_to(PROJECT / name, target_is_directory=True)
    shared = shared or PROJECT.parent / "shared"
    if shared.is_dir() and not (work / "shared").exists():
        (work / "shared").symlink_to(shared.resolve(), target_is_directory=True)
    return project


def _aim(spec: dict[str, Any], urls: list[str], concurrency: int) -> dict[str, Any]:
    out = dict(spec)
    if out.get("kind") == "openai":
        out.update(base_urls=list(urls), api_key_env=None, max_concurrency=concurrency)
    return out


def paper_params(
    *,
    urls: dict[str, list[str]],
    fraction: float = 1.0,
    fractions: dict[str, float] | None = None,
    root: Path = PROJECT,
) -> dict[str, Any]:
    """The params of the simulated paper-scale run (see the module docstring); ``urls`` per team."""
    unknown = sorted(set(fractions or {}) - set(TEAMS))
    if unknown:
        raise ValueError(f"fractions: unknown teams {unknown}; use {', '.join(TEAMS)}")
    share = {team: float((fractions or {}).get(team, fraction)) for team in TEAMS}
    base = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    params = apply_profile(base, load_profile("paper", root=root))
    for team in TEAMS:
        section = params[team]
        llm = section["llm"]
        concurrency = int(section.get("concurrency", 256))
        llm["default"] = _aim(llm.get("default") or params["llm"]["default"], urls[team], concurrency)
        llm["roles"] = {role: _aim(spec, urls[team], concurrency) for role, spec in (llm.get("roles") or {}).items()}
        llm["cache"] = f"data/cache/{team}.sqlite"
        llm.setdefault("sampling", {})["seed"] = 0  # sampled re-asks reproducible (docs/runtime.md)
        section["progress"] = False
    params["ram2c"]["dialogues"] = max(1, round(params["ram2c"]["dialogues"] * share["ram2c"]))
    for dataset in params["kgc"]["datasets"]:
        if dataset.get("sample"):
            dataset["sample"] = max(1, round(dataset["sample"] * share["kgc"]))
    if share["tagging"] < 1.0:
        params["tagging"]["data"]["limit"] = max(1, round(TAGGING_EVALUATION_PAIRS * share["tagging"]))
        params["tagging"]["split"]["generation_limit"] = max(1, round(TAGGING_GENERATION_PAIRS * share["tagging"]))
    params["build_kb"]["quality"]["enabled"] = False
    return params


def served_names(params: dict[str, Any]) -> list[str]:
    """The model names the teams' backends ask for: what the simulated servers must serve
    (``--served-model-name``), as the real vLLM servers would."""
    specs = [spec for team in TEAMS for spec in [params[team]["llm"]["default"],
                                                 *(params[team]["llm"].get("roles") or {}).values()]]
    return sorted({spec["model"] for spec in specs if spec.get("kind") == "openai"})


def write_params(project: Path, params: dict[str, Any], name: str = "params.yaml") -> Path:
    path = project / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), encoding="utf-8")
    os.replace(tmp, path)
    return path


def scaled_counts(params: dict[str, Any]) -> dict[str, Any]:
    """The item counts the params ask for, per team (for the report)."""
    kgc = params["kgc"]
    return {
        "ram2c": {"dialogues": params["ram2c"]["dialogues"], "turns": params["ram2c"]["turns"],
                  "experts_per_group": params["ram2c"]["experts_per_group"]},
        "kgc": {"datasets": len(kgc["datasets"]), "sample_per_dataset": [d.get("sample") for d in kgc["datasets"]],
                "shots": kgc["shots"], "rounds": kgc["team"]["rounds"], "systems": kgc["systems"]},
        "tagging": {"evaluation_limit": params["tagging"]["data"]["limit"],
                    "generation_limit": params["tagging"]["split"]["generation_limit"]},
    }


def paper_items(*, root: Path = PROJECT) -> dict[str, int]:
    """The paper profile's item counts per team: RAM2C's dialogues, KGC's sentences over the
    datasets (asked for: a dataset at hand may hold fewer), tagging's evaluation and generation pairs."""
    base = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    full = apply_profile(base, load_profile("paper", root=root))
    return {
        "tagging": TAGGING_EVALUATION_PAIRS + TAGGING_GENERATION_PAIRS,
        "kgc": sum(d.get("sample") or 0 for d in full["kgc"]["datasets"]),
        "ram2c": full["ram2c"]["dialogues"],
    }


def effective_fractions(params: dict[str, Any], *, root: Path = PROJECT) -> dict[str, float]:
    """Each team's share of the paper's item counts in ``params`` as rounded there (what a
    projection multiplies the measured run by the inverse of, unless the run wrote fewer items:
    :func:`ran_fraction`)."""
    full = paper_items(root=root)
    kgc = sum(d.get("sample") or 0 for d in params["kgc"]["datasets"])
    tagging = params["tagging"]
    pairs = (tagging["data"]["limit"] or TAGGING_EVALUATION_PAIRS) + (
        tagging["split"]["generation_limit"] or TAGGING_GENERATION_PAIRS
    )
    return {
        "tagging": min(1.0, pairs / full["tagging"]),
        "kgc": kgc / full["kgc"] if full["kgc"] else 1.0,
        "ram2c": params["ram2c"]["dialogues"] / full["ram2c"],
    }


def ran_fraction(team: str, items: int, requested: float, *, root: Path = PROJECT) -> float:
    """The share of the paper's items a run really covered: ``items`` written over the paper's count,
    at most the ``requested`` share (KGC's bundled datasets hold fewer sentences than 100 each)."""
    return min(requested, items / paper_items(root=root)[team]) if items else requested
