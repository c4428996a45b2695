"""What every DVC stage shares: argument parsing, logging, strict params, tracking, metrics.

A stage file is then only its own logic::

    def main(argv=None):
        args, cfg = stage_setup("build_kb", "build_kb", BuildKBConfig, argv)
        with stage_run("build_kb", cfg.model_dump()) as run:
            metrics = build_knowledge_base(cfg)
            write_metrics("reports/build_kb/metrics.json", metrics, run)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from pipelines.config import ConfigError, load_section
from pipelines.io import write_json_atomic
from pipelines.tracking import StageRun

T = TypeVar("T", bound=BaseModel)

log = logging.getLogger("edumas")


def setup_logging(level: str | None = None) -> None:
    """Readable logs on stderr; level from ``EDUMAS_LOG_LEVEL`` (default INFO)."""
    logging.basicConfig(
        level=(level or os.environ.get("EDUMAS_LOG_LEVEL", "INFO")).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("httpx", "urllib3", "chromadb", "datasets", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def stage_setup(
    stage: str, section: str, model: type[T], argv: list[str] | None = None
) -> tuple[argparse.Namespace, T]:
    """Parse ``--params`` (and ``--section``), configure logging, load the section strictly.

    A :class:`ConfigError` ends the process with exit code 2 and the message alone (it already
    says the file, line and fix), not a traceback.
    """
    parser = argparse.ArgumentParser(prog=f"stages.{stage}", description=f"DVC stage {stage}")
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--section", default=section, help=f"params section (default: {section})")
    args = parser.parse_args(argv)
    setup_logging()
    try:
        cfg = load_section(args.section, model, Path(args.params))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    log.info("stage %s: params section '%s' of %s", stage, args.section, args.params)
    return args, cfg


def write_metrics(path: Path | str, metrics: dict[str, Any], run: StageRun | None = None) -> None:
    """Write metrics JSON for DVC (atomically) and log them to the stage's W&B run."""
    write_json_atomic(path, metrics)
    if run is not None:
        run.log_metrics(metrics)
    log.info("metrics written to %s", path)
