"""DVC stage ``build_kb``: build the expert groups' knowledge bases (Chroma under ``data/kb``) and
score retrieval on the labelled query set.

Outs: ``data/kb``; metrics: ``reports/build_kb/metrics.json`` (files, chunks, new/changed/deleted,
chunks per second, recall@k and MRR) and ``reports/build_kb/retrieval_quality.json`` (per query).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from pipelines.io import write_json_atomic
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.retrieval.loaders import KBBuildError
from pipelines.retrieval.service import run_build_kb
from pipelines.stage import run_stage, stage_setup_sections, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger("edumas")

REPORTS = Path("reports/build_kb")


MANIFEST = "manifest.json"  # the DVC out of the store: Chroma rewrites its own files whenever a reader opens them


def manifest(metrics: dict) -> dict:
    """What the store holds, and nothing that changes from run to run: the embedder and, per kind,
    the number and digest of the chunk ids. Stages that read the store depend on this file."""
    return {"embedder": metrics["embedder"], "chunks_by_kind": metrics["chunks_by_kind"],
            "chunk_ids_sha256": metrics["chunk_ids_sha256"]}


def _run(argv: list[str] | None) -> int:
    _, cfgs = stage_setup_sections("build_kb", {"build_kb": BuildKBConfig, "retrieval": RetrievalConfig}, argv)
    cfg, retrieval = cfgs["build_kb"], cfgs["retrieval"]
    params = {"build_kb": cfg.model_dump(), "retrieval": retrieval.model_dump()}
    with stage_run("build_kb", params) as run:
        try:
            metrics, quality = run_build_kb(cfg, retrieval)
        except (KBBuildError, FileNotFoundError) as exc:
            print(f"error: {exc}\nthe previous knowledge base (if any) is unchanged", file=sys.stderr)
            return 1
        if metrics["optional_sources_missing"]:
            log.warning("optional sources left out: %s", ", ".join(metrics["optional_sources_missing"]))
        if quality is not None:
            log.info("retrieval quality: dense %s | multi-query RRF %s", quality["dense"], quality["multi_query_rrf"])
        else:  # the file is a DVC metric: it always exists, and never holds a previous run's scores
            quality = {"enabled": False, "note": "build_kb.quality.enabled is false: retrieval was not scored"}
        write_json_atomic(REPORTS / "retrieval_quality.json", quality)
        write_json_atomic(Path(cfg.store.path) / MANIFEST, manifest(metrics))
        write_metrics(REPORTS / "metrics.json", metrics, run)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit code 0, 2 (bad params) or 1 (one ``error: ...`` line; ``--debug`` adds the traceback)."""
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
