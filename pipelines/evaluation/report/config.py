"""The ``report`` section of params.yaml (stage ``report``): which metrics files and traces are
read, where the report files go, how many samples per team the trace browser shows."""

from __future__ import annotations

from pydantic import Field

from pipelines.config import StrictModel


class ReportInputs(StrictModel):
    """Files read when they exist (a missing one is a note in the report, never an error)."""

    tagging: str = "reports/generate_tagging/metrics.json"
    kgc: str = "reports/generate_kgc/metrics.json"
    kgc_rounds: str = "reports/generate_kgc/rounds.csv"
    ram2c: str = "reports/generate_ram2c/metrics.json"
    train: dict[str, str] = Field(
        default_factory=lambda: {"sft": "reports/train/sft", "dpo": "reports/train/dpo"},
        description="run name -> folder holding that run's metrics.json and loss.csv",
    )
    evaluate: str = "reports/evaluate/metrics.json"
    make_datasets: str = "reports/make_datasets/metrics.json"  # rows dropped (too long, ...): shortfalls only
    build_kb: str = "reports/build_kb/metrics.json"  # knowledge-base kinds left empty: shortfalls only
    ablations: str = "reports/ablations.json"  # the ablation set's tables (pipelines.evaluation.ablation.experiments)


class ReportOutputs(StrictModel):
    reports_dir: str = "reports"  # summary.md, summary.html, plots/ (PNG + CSV for dvc plots)
    traces_html: str = "reports/traces.html"
    metrics: str = "reports/report/metrics.json"


TEAM_FOLDERS = {"tagging": "data/generated/tagging", "kgc": "data/generated/kgc", "ram2c": "data/generated/ram2c",
                "ram2c_topics": "data/generated/ram2c/topics"}  # the RAM2C topic writer's own traces  # fmt: skip


def _team_files(name: str) -> dict[str, str]:
    return {team: f"{folder}/{name}" for team, folder in TEAM_FOLDERS.items()}


class ReportConfig(StrictModel):
    title: str = "edumas results"
    inputs: ReportInputs = ReportInputs()
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
    trace_seed: int = 0
    generators: list[str] = Field(
        default_factory=lambda: ["tagging", "kgc", "ram2c"],
        description="params sections whose llm backends decide offline_default (and name the models)",
    )
    outputs: ReportOutputs = ReportOutputs()
