"""The ``report`` section of params.yaml (stage ``report``): which metrics files and traces are
read, where the report files go, how many samples per team the trace browser shows."""

from __future__ import annotations

from pydantic import Field

from pipelines.config import StrictModel


class ReportInputs(StrictModel):
    """Files read when they exist (a missing one is a note in the report, never an error)."""

    tagging: str = Field("reports/generate_tagging/metrics.json", description="generate_tagging: Table 4 layout")
    kgc: str = Field("reports/generate_kgc/metrics.json", description="generate_kgc: Table 2 layout")
    kgc_rounds: str = Field(
        "reports/generate_kgc/rounds.csv",
        description="generate_kgc: F1 per round (system, dataset, round, f1)",
    )
    ram2c: str = Field(
        "reports/generate_ram2c/metrics.json",
        description="generate_ram2c: pairs kept/dropped, group reflection",
    )
    train: dict[str, str] = Field(
        default_factory=lambda: {"sft": "reports/train/sft", "dpo": "reports/train/dpo"},
        description="run name -> folder holding that run's metrics.json and loss.csv",
    )
    evaluate: str = Field(
        "reports/evaluate/metrics.json",
        description="evaluate: base vs tuned, HTS tables, deltas with intervals",
    )
    make_datasets: str = Field(
        "reports/make_datasets/metrics.json",
        description="make_datasets: rows dropped (too long, ...) as shortfalls",
    )
    build_kb: str = Field(
        "reports/build_kb/metrics.json",
        description="build_kb: knowledge-base kinds left with 0 chunks as shortfalls",
    )
    ablations: str = Field(
        "reports/ablations.json",
        description="the ablation set's tables (python -m pipelines.evaluation.ablation.experiments all)",
    )


class ReportOutputs(StrictModel):
    reports_dir: str = Field(
        "reports",
        description="summary.md, summary.html, plots/ (PNG + CSV for dvc plots)",
    )
    traces_html: str = Field("reports/traces.html", description="the trace browser")
    metrics: str = Field(
        "reports/report/metrics.json",
        description="which inputs were found, sections, plots, offline_default",
    )


TEAM_FOLDERS = {"tagging": "data/generated/tagging", "kgc": "data/generated/kgc", "ram2c": "data/generated/ram2c",
                "ram2c_topics": "data/generated/ram2c/topics"}  # the RAM2C topic writer's own traces  # fmt: skip


def _team_files(name: str) -> dict[str, str]:
    return {team: f"{folder}/{name}" for team, folder in TEAM_FOLDERS.items()}


class ReportConfig(StrictModel):
    title: str = Field("edumas results", description="heading of summary.md / summary.html")
    inputs: ReportInputs = Field(
        ReportInputs(),
        description="read when present; a missing file is a note in the report, never an error",
    )
    traces: dict[str, str] = Field(
        default_factory=lambda: _team_files("traces.jsonl"),
        description="team -> traces.jsonl shown in the trace browser (missing files are noted)",
    )
    records: dict[str, str] = Field(
        default_factory=lambda: _team_files("predictions.jsonl"),
        description="team -> predictions.jsonl whose rows (by id) head each story: KGC's gold, tagging's label",
    )
    evaluate_traces: str | None = Field(
        "data/evaluate",
        description="evaluate's traces_dir: its comparisons (both replies, judge prompts, verdicts, ties) and "
        "the tagging / KGC arms' traces join the browser when present; null = left out",
    )
    trace_limit: int | None = Field(200, ge=1, description="samples per team in traces.html (seeded); null = all")
    trace_seed: int = Field(0, description="seed of the trace_limit sample")
    generators: list[str] = Field(
        default_factory=lambda: ["tagging", "kgc", "ram2c"],
        description="params sections whose llm backends decide offline_default (and name the models)",
    )
    outputs: ReportOutputs = Field(ReportOutputs(), description="where the report is written")
