"""DVC stage ``prepare_models``: the offline default chat model and embedder, from installed packages.

Reads the ``prepare_models`` section of params.yaml (see
:class:`pipelines.models.prepare.PrepareModelsConfig`), runs
:func:`pipelines.models.prepare.prepare_default_models`, and writes:

- ``models/base/smollm2-135m-instruct/`` (safetensors + tokenizer + SOURCE.json)
- ``models/base/all-minilm-l6-v2/`` (sentence-transformers folder + SOURCE.json)
- ``reports/prepare_models/metrics.json`` (parameters, load time, smoke reply, source hashes)

    python -m stages.prepare_models [--params params.yaml] [--section prepare_models]
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipelines.models.prepare import PrepareModelsConfig, prepare_default_models
from pipelines.stage import run_stage, stage_setup, write_metrics
from pipelines.tracking import stage_run

log = logging.getLogger("edumas.stages.prepare_models")


def _run(argv: list[str] | None) -> int:
    _, cfg = stage_setup("prepare_models", "prepare_models", PrepareModelsConfig, argv)
    with stage_run("prepare_models", cfg.model_dump()) as run:
        metrics = prepare_default_models(
            Path(cfg.chat_model_dir),
            Path(cfg.embedder_dir),
            cfg.dtype,
            force=cfg.force,
            smoke_prompt=cfg.smoke_prompt,
            smoke_max_tokens=cfg.smoke_max_tokens,
        )
        write_metrics(Path(cfg.reports_dir) / "metrics.json", metrics, run)
    chat = metrics["chat_model"]
    log.info(
        "chat model %s: %d parameters, loads in %.2f s, replies %r",
        cfg.chat_model_dir,
        chat["parameters"],
        chat.get("load_seconds", float("nan")),
        chat.get("reply", ""),
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit code 0, 2 (bad params) or 1 (one ``error: ...`` line); metrics in ``reports_dir``."""
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
