"""Where a generate stage writes: its two output folders, named once in the team config's defaults."""

from __future__ import annotations

from pipelines.config import StrictModel


class GenerationOutputs(StrictModel):
    """Where a generate stage writes (the one place an output folder is named; dvc.yaml lists the files)."""

    generated_dir: str
    reports_dir: str
