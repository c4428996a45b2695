"""The report's plots on recorded real output (tests/evaluation/recorded): the PNG figures' axes fit
the data (an all-zero F1 on a readable 0-10 axis, rates on 0-1, HTS on 0-100), rounds and steps
have integer ticks, SFT and DPO losses have axes of their own, legends lie outside the axes, a
missing value is written "n/a" where a zero bar would be; and the `dvc plots show --json` Vega
specs (dvc.yaml's templates) draw one line or bar per series, checked on the SVG that Vega itself
renders (vl-convert), whose axis and legend descriptions say the ranges and series."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest
from matplotlib.colors import to_hex

from pipelines.evaluation.report.build import collect_metrics
from pipelines.evaluation.report.config import ReportConfig
from pipelines.evaluation.report.plot_data import write_plot_data
from pipelines.evaluation.report.summary import write_plots
from pipelines.reporting import plots
from pipelines.reporting.tables import SYSTEM_NAMES
from tests.evaluation.recorded import lay_out

matplotlib.use("Agg")
PROJECT = Path(__file__).resolve().parents[3]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sections(tmp_path_factory) -> dict:
    """The report's metrics sections from the recorded smoke run, as the report stage builds them."""
    import yaml

    root = tmp_path_factory.mktemp("recorded")
    lay_out(root)
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    return collect_metrics(ReportConfig(), params, root=root)


def _integer_ticks(axis) -> bool:
    ticks = [t for t in axis.get_majorticklocs() if axis.get_view_interval()[0] <= t <= axis.get_view_interval()[1]]
    return bool(ticks) and all(float(t).is_integer() for t in ticks)


def _legend_outside(fig, ax) -> bool:
    legend = ax.get_legend()
    fig.canvas.draw()
    box, frame = legend.get_window_extent(), ax.get_window_extent()
    return box.x0 >= frame.x1 or box.y1 <= frame.y0 or box.x1 <= frame.x0 or box.y0 >= frame.y1


def test_kgc_rounds_an_all_zero_f1_on_a_readable_axis(sections):
    rounds = sections["kgc"]["rounds"]
    assert rounds and all(v == 0.0 for values in rounds.values() for v in values)  # what the smoke run gave
    fig = plots.kgc_rounds_figure(sections["kgc"])
    ax = fig.axes[0]
    assert ax.get_ylim() == (0.0, 10.0)  # not the -0.04..0.04 band matplotlib picks for a constant
    assert _integer_ticks(ax.xaxis) and len(ax.get_lines()) == len(rounds)
    markers = {line.get_marker() for line in ax.get_lines()}
    assert len(markers) == len(rounds)  # coinciding series stay visible
    labels = [f"{series} (0 at every round)" for series in rounds]  # an all-zero series says so
    assert [t.get_text() for t in ax.get_legend().get_texts()] == labels and _legend_outside(fig, ax)
    assert [t.get_text() for t in ax.texts] == [f"all {len(rounds)} series: F1 0 at every round (lines overlap)"]
    assert plots.percent_axis_top([0.0, 47.0]) == 60.0 and plots.percent_axis_top([99.0]) == 100.0


def _captured(monkeypatch, module) -> list:
    """The figures ``module`` hands to its ``save_figure`` (they stay open for the test)."""
    figures: list = []
    monkeypatch.setattr(module, "save_figure", lambda fig, path: figures.append(fig))
    return figures


def test_the_stages_own_plots_read_like_the_reports(monkeypatch, tmp_path):
    """generate_kgc's rounds.png, generate_tagging's metrics.png and train's loss.png on the recorded
    files: F1 on 0-100 (not a negative band), integer rounds and steps, legends beside the bars."""
    import csv
    import json

    from pipelines.kgc import report as kgc_report
    from pipelines.tagging import report as tagging_report
    from pipelines.training import summary as training_summary

    recorded = PROJECT / "tests/evaluation/recorded/smoke/reports"
    figures = _captured(monkeypatch, plots)
    with open(recorded / "generate_kgc/rounds.csv", encoding="utf-8", newline="") as handle:
        rows = [{**r, "round": int(r["round"]), "f1": float(r["f1"])} for r in csv.DictReader(handle)]
    kgc_report.write_rounds_plot(tmp_path / "rounds.png", rows)
    ax = figures[-1].axes[0]
    assert ax.get_ylim() == (0.0, 10.0) and _integer_ticks(ax.xaxis) and _legend_outside(figures[-1], ax)
    assert ax.texts[0].get_text().endswith("F1 0 at every round (lines overlap)")

    figures = _captured(monkeypatch, tagging_report)
    systems = json.loads((recorded / "generate_tagging/metrics.json").read_text(encoding="utf-8"))["systems"]
    tagging_report.write_plot(tmp_path / "metrics.png", systems)
    ax = figures[-1].axes[0]
    assert ax.get_ylim()[0] == 0.0 and _legend_outside(figures[-1], ax)  # the Coverage bars (1.0) uncovered

    figures = _captured(monkeypatch, training_summary)
    history = [{"step": s, "loss": v} for s, v in training_summary.read_loss_csv(recorded / "train/sft/loss.csv")]
    training_summary.plot_losses(history, tmp_path / "loss.png", title="sft")
    assert _integer_ticks(figures[-1].axes[0].xaxis)  # one logged step: no 0.75, 1.25 ticks


def test_training_losses_on_separate_axes(sections):
    runs = sections["training"]["runs"]
    fig = plots.training_loss_figure(sections["training"])
    assert len(fig.axes) == len(runs) == 2
    for ax, (run, result) in zip(fig.axes, runs.items(), strict=True):
        assert ax.get_title().startswith(run) and _integer_ticks(ax.xaxis)
        (line,) = ax.get_lines()
        assert list(line.get_ydata()) == [loss for _, loss in result["loss"]]
        low, high = ax.get_ylim()
        assert low < min(line.get_ydata()) <= max(line.get_ydata()) < high


def test_tagging_bars_on_zero_to_one_with_values_written(sections):
    tagging = sections["tagging"]
    fig = plots.tagging_figure(tagging)
    ax = fig.axes[0]
    systems = [s for model in tagging["models"].values() for s in model["systems"]]
    assert ax.get_ylim()[0] == 0.0 and 1.0 <= ax.get_ylim()[1] <= 1.1
    assert len(ax.containers) == len(systems) and _legend_outside(fig, ax)
    written = [t.get_text() for t in ax.texts]
    assert len(written) == 3 * len(systems) and "0.00" in written  # a zero bar says 0.00
    missing = {"models": {"m": {"systems": {"team": {"overall": {"precision": 0.0, "recall": 0.5}}}}}}
    assert [t.get_text() for t in plots.tagging_figure(missing).axes[0].texts] == ["0.00", "0.50", "n/a"]


def test_hts_bars_with_intervals(sections):
    hts = sections["hts"]
    fig = plots.hts_figure(hts)
    ax = fig.axes[0]
    assert ax.get_ylim() == (0.0, 105.0) and _legend_outside(fig, ax)
    rows = [dims for table in hts["tables"].values() for dims in table["rows"].values()]
    intervals = sum(1 for dims in rows for d in dims.values() if isinstance(d, dict) and d.get("ci"))
    error_bars = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(error_bars) == intervals  # a bar without an interval (n too small) has none
    colours = {to_hex(colour) for c in error_bars for lines in c.lines[2] for colour in lines.get_color()}
    assert colours == ({"#000000"} if intervals else set())


def test_write_plots_gives_pngs(sections, tmp_path):
    written = write_plots(sections, tmp_path)
    names = ["tagging_prf1.png", "kgc_f1_rounds.png", "hts_scores.png", "training_loss.png"]
    assert [p.name for p in written] == names
    assert all(p.read_bytes().startswith(PNG) and p.stat().st_size > 5000 for p in written)


def _dvc_plot_specs(sections, tmp_path) -> dict[str, dict]:
    """`dvc plots show --json` of dvc.yaml's top-level plots on the recorded data, in a git + DVC folder."""
    import yaml

    repo = tmp_path / "repo"
    shutil.copytree(PROJECT / ".dvc" / "plots", repo / ".dvc" / "plots")
    (repo / ".dvc" / "config").write_text("[core]\n    analytics = false\n", encoding="utf-8")
    plots_block = yaml.safe_load((PROJECT / "dvc.yaml").read_text(encoding="utf-8"))["plots"]
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"plots": plots_block}), encoding="utf-8")
    write_plot_data(sections, repo / "reports" / "plots")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    dvc = Path(sys.executable).parent / "dvc"
    shown = subprocess.run([str(dvc), "plots", "show", "--json"], cwd=repo, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    import json

    data = json.loads(shown.stdout)["data"]
    return {Path(name).stem: entries[0]["content"] for name, entries in data.items()}


def _aria(svg: str) -> list[str]:
    return re.findall(r'aria-label="([^"]*)"', svg)


def test_dvc_plots_draw_each_series(sections, tmp_path):
    vl_convert = pytest.importorskip("vl_convert", reason="vl-convert-python renders Vega-Lite (the dev extra)")
    specs = _dvc_plot_specs(sections, tmp_path)
    assert sorted(specs) == ["hts_scores", "kgc_f1_rounds", "tagging_prf1", "training_loss"]
    expected = {
        "kgc_f1_rounds": (list(sections["kgc"]["rounds"]),
                          "Y-axis titled 'F1 (0-1)' for a linear scale with values from 0.0 to 1.0"),
        "training_loss": (list(sections["training"]["runs"]), None),
        "tagging_prf1": ([f"{SYSTEM_NAMES.get(s, s)} · {m}" for m, r in sections["tagging"]["models"].items()
                          for s in r["systems"]],
                         "X-axis titled 'score (0-1)' for a linear scale with values from 0.0 to 1.0"),
        "hts_scores": ([label for t in sections["hts"]["tables"].values() for label in t["rows"]],
                       "X-axis titled 'score (0-100)' for a linear scale with values from 0 to 100"),
    }  # fmt: skip
    for stem, (series, axis) in expected.items():
        spec = specs[stem]
        rows = spec["data"]["values"]
        assert {r["series"] for r in rows} == set(series), stem
        labels = _aria(vl_convert.vegalite_to_svg(spec))
        legends = [label for label in labels if label.startswith("Symbol legend titled 'series'")]
        if stem == "training_loss":  # one panel per run, each with its own loss axis
            panels = [label for label in labels if label.startswith("Y-axis titled 'loss'")]
            assert len(panels) == len(series), labels
            continue
        assert legends and f"with {len(set(r['series'] for r in rows))} value" in legends[0], labels
        assert axis in labels, labels
    rounds = _aria(vl_convert.vegalite_to_svg(specs["kgc_f1_rounds"]))
    assert any(label.startswith("X-axis titled 'round'") and "from 0 to 1" in label for label in rounds)
