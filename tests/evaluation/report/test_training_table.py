"""The summary's fine-tuning table on the recorded smoke run: the whole logged loss curve (not first
and last), the rows trained and held out, the trainer's evaluation metrics and the parity probe."""

from __future__ import annotations

import csv

from pipelines.evaluation.report.inputs import training_run, training_section
from pipelines.reporting.tables import loss_curve_cell, training_table
from tests.evaluation.recorded import RECORDED, metrics


def recorded_loss(run: str) -> list[list[float]]:
    with (RECORDED / "reports" / "train" / run / "loss.csv").open(encoding="utf-8") as handle:
        return [[float(row["step"]), float(row["loss"])] for row in csv.DictReader(handle)]


def test_the_table_shows_the_recorded_curves_rows_evaluation_and_probe():
    params = {"train": {"sft": {"method": "sft", "tuning": "lora"}, "dpo": {"method": "dpo", "tuning": "lora"}}}
    runs = {run: training_run(run, metrics(f"train/{run}"), recorded_loss(run), params) for run in ("sft", "dpo")}
    table = training_table(training_section(runs))
    rows = {row[0]: row for row in table.rows}
    dpo, sft = metrics("train/dpo"), metrics("train/sft")
    assert len(dpo["loss_curve"]) == 3 and dpo["loss_curve"][0][1] != dpo["loss_curve"][-1][1]  # it trained
    assert rows["dpo"][2] == f"{dpo['train_rows']} / {dpo['eval_rows']}"
    assert rows["dpo"][3] == " · ".join(f"{int(s)}: {loss:.3f}" for s, loss in dpo["loss_curve"])
    assert f"reward margin {dpo['eval_rewards/margins']:.4g}" in rows["dpo"][4]
    assert f"loss {sft['eval_loss']:.4g}" in rows["sft"][4] and "reward" not in rows["sft"][4]
    for run, values in (("sft", sft), ("dpo", dpo)):
        probe = values["lm_head"]
        assert rows[run][5].startswith("passed" if probe["passed"] else "**failed**")
        assert f"over {probe['rows']} rows" in rows[run][5]


def test_a_long_curve_keeps_first_and_last_and_says_how_many():
    points = [[step, 1.0 / step] for step in range(1, 101)]
    cell = loss_curve_cell(points)
    assert cell.startswith("1: 1.000 · ") and " · 100: 0.010 (100 points; plot below)" in cell
    assert cell.count(":") == 8 and loss_curve_cell([]) == "-"
