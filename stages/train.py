"""DVC stage ``train``: one SFT or DPO run (trl) with full, LoRA or QLoRA tuning.

Run ``python -m stages.train --section train.sft`` (or ``train.dpo``; a preset:
``--params configs/training/<preset>.yaml --section train``). On several GPUs or nodes launch the
same module with ``accelerate launch --config_file configs/accelerate/<config>.yaml -m stages.train ...``:
every rank trains, rank 0 alone writes cards, metrics and the W&B run.

Outs: ``<output_dir>/checkpoints`` (persist; a restarted run resumes from the last one),
``<output_dir>/final`` (adapter or weights, tokenizer, model card), ``<output_dir>/merged`` when
``merge: true``; ``<reports_dir>/{metrics.json,loss.csv,loss.png}``. ``metrics.json`` (and the W&B config,
as ``lm_head_probe``) carries the LM-head parity probe of the first step (``lm_head``).
"""

from __future__ import annotations

import os
import sys
from contextlib import nullcontext

from pipelines.agents.shortfalls import flag_shortfalls, flat_shortfall
from pipelines.stage import run_stage, stage_setup, write_metrics
from pipelines.tracking import StageRun, stage_run, wandb_mode
from pipelines.training.config import TrainConfig, tracking_names
from pipelines.training.families import FamilyError
from pipelines.training.run import TrainingSetupError, is_main_process, run_training
from pipelines.training.summary import read_loss_csv


def tracking_enabled(cfg: TrainConfig) -> bool:
    """W&B only when params ask for it and tracking is not switched off (EDUMAS_TRACKING=0, WANDB_MODE=disabled)."""
    return (
        cfg.tracking.report_to == "wandb"
        and os.environ.get("EDUMAS_TRACKING", "1") != "0"
        and wandb_mode() != "disabled"
    )


def loss_shortfalls(cfg: TrainConfig) -> list[dict]:
    """A loss that did not move over the logged steps (e.g. DPO at ln 2 = 0.693 throughout) is a
    shortfall: a WARNING here and a row of the metrics' ``shortfalls``."""
    path = cfg.reports_path / "loss.csv"
    losses = [loss for _, loss in read_loss_csv(path)] if path.exists() else []
    flat = flat_shortfall(f"{cfg.method.upper()} loss", losses, unit="logged step")
    return flag_shortfalls(f"train@{cfg.method}", [flat])


def _run(argv: list[str] | None) -> int:
    args, cfg = stage_setup("train", "train", TrainConfig, argv)
    names = tracking_names(cfg)
    report_to = "wandb" if tracking_enabled(cfg) else "none"
    if report_to == "wandb":  # read by wandb.init and the Trainer's W&B callback
        os.environ["WANDB_PROJECT"] = names["project"]
        os.environ["WANDB_NAME"] = names["name"]
        if names["group"]:
            os.environ["WANDB_RUN_GROUP"] = names["group"]
    main_rank = is_main_process()
    tracker = (  # no W&B run at all with report_to: none (or tracking off), and none on other ranks
        stage_run("train", cfg.model_dump(), project=names["project"], group=names["group"], name=names["name"])
        if main_rank and report_to == "wandb"
        else nullcontext(StageRun(None))
    )
    with tracker as run:
        try:
            metrics = run_training(cfg, report_to=report_to, run_name=names["name"])
        except (TrainingSetupError, FamilyError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if main_rank:
            if found := loss_shortfalls(cfg):
                metrics["shortfalls"] = found
            write_metrics(cfg.reports_path / "metrics.json", metrics, run)
            if run.run is not None and metrics.get("lm_head"):  # the head check, next to the params it ran with
                run.run.config.update({"lm_head_probe": metrics["lm_head"]}, allow_val_change=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit code 0, 2 (bad params) or 1 (one ``error: ...`` line; ``--debug`` adds the traceback)."""
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
