"""What a finished run leaves behind besides the weights: loss history, model card, summary, plots.

Inputs: the run's config, family, metrics and the Trainer's log history. Outputs:
``final/training_summary.json`` and ``final/README.md`` (base model, data hashes, params, metrics)
and ``<reports_dir>/loss.csv`` + ``loss.png``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pipelines.io import atomic_open, write_json_atomic
from pipelines.reporting.plots import save_figure, step_axis
from pipelines.training.cards import render_model_card
from pipelines.training.config import TrainConfig
from pipelines.training.families import Family, read_model_type


def loss_history(log_history: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per logged step: loss and accuracy (SFT: next-token accuracy on the completion; DPO: chosen > rejected)."""
    history = []
    for entry in log_history:
        if "loss" in entry and "step" in entry:
            accuracy = entry.get("rewards/accuracies", entry.get("mean_token_accuracy", float("nan")))
            history.append({"step": entry["step"], "loss": entry["loss"], "accuracy": accuracy})
    return history


def run_metrics(history: list[dict[str, float]], train_data, eval_data) -> dict[str, Any]:
    """The whole logged loss curve (``loss_curve``: ``[[step, loss], ...]``), its first and last loss, and the
    number of training and evaluation rows the run read."""
    curve = [[int(h["step"]), float(h["loss"])] for h in history]
    metrics: dict[str, Any] = {"loss_curve": curve}
    if curve:
        metrics["first_logged_loss"], metrics["last_logged_loss"] = curve[0][1], curve[-1][1]
    metrics["train_rows"] = len(train_data) if train_data is not None else 0
    metrics["eval_rows"] = len(eval_data) if eval_data is not None else 0
    return metrics


def read_loss_csv(path: Path) -> list[list[float]]:
    """``loss.csv`` as :func:`write_run_summary` writes it -> ``[[step, loss], ...]`` (rows without a loss skipped)."""
    points = []
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            try:
                points.append([int(float(row["step"])), float(row["loss"])])
            except (KeyError, TypeError, ValueError):
                continue
    return points


def data_summary(cfg: TrainConfig, data_sha: str) -> dict[str, Any]:
    summary: dict[str, Any] = {"dataset": cfg.dataset, "arrow_sha256": data_sha}
    if cfg.data_card and Path(cfg.data_card).exists():
        card = json.loads(Path(cfg.data_card).read_text(encoding="utf-8"))
        summary["split_sha256"] = card.get("sha256", {}).get(cfg.method)
        summary["counts"] = card.get("counts", {}).get(cfg.method)
        summary["demo_fixture_inputs"] = [i["path"] for i in card.get("inputs", []) if i.get("demo_fixture_rows")]
    return summary


def write_run_summary(
    cfg: TrainConfig, family: Family, metrics: dict, history: list, checkpoint, data_sha: str, run_name: str | None
) -> None:
    """``training_summary.json`` + ``README.md`` in ``final/``; loss curve CSV/PNG in the reports folder."""
    info = {
        "run_name": run_name or f"{cfg.method}-{Path(cfg.model).name}",
        "base_model": cfg.model,
        "family": family.name,
        "model_type": read_model_type(cfg.model),
        "method": cfg.method,
        "tuning": cfg.tuning,
        "artifact": "LoRA adapter (load with peft)" if cfg.tuning != "full" else "full model weights",
        "resumed_from_step": metrics["resumed_from_step"],
        "resumed_from_checkpoint": str(checkpoint) if checkpoint else None,
        "data": data_summary(cfg, data_sha),
        "params": cfg.model_dump(),
        "metrics": metrics,
    }
    write_json_atomic(cfg.final_dir / "training_summary.json", info)
    with atomic_open(cfg.final_dir / "README.md") as handle:
        handle.write(render_model_card(info))
    reports = cfg.reports_path
    with atomic_open(reports / "loss.csv") as handle:
        handle.write("step,loss,accuracy\n" + "".join(f"{h['step']},{h['loss']},{h['accuracy']}\n" for h in history))
    plot_losses(history, reports / "loss.png", title=info["run_name"])


def plot_losses(history: list[dict[str, float]], path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([h["step"] for h in history], [h["loss"] for h in history], marker=".")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(title)
    step_axis(ax, [h["step"] for h in history])
    save_figure(fig, path)
