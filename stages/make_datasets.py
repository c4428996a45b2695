"""DVC stage ``make_datasets``: merge, deduplicate, length-filter and split the generated SFT and DPO
rows into ``datasets`` folders with a data card.

Params: ``make_datasets`` (see :class:`pipelines.training.dataset_builder.MakeDatasetsConfig`) and the
train sections its ``targets`` name (``train.sft``, ``train.dpo``): each dataset is length-filtered with
the tokenizer, family and ``max_length`` of the run it feeds.
Near duplicates are dropped and every row is checked against the evaluation items (the tagging and
KGC sections' evaluation sets, read with their own readers; tutoring held-out prompts; extra files).
Outs: ``<output_dir>/sft``, ``<output_dir>/dpo`` (DatasetDict train/eval with a Hugging Face
``README.md`` card), ``<output_dir>/data_card.json`` and ``DATA_CARD.md``,
``make_datasets.contamination.output`` (one line per match); ``reports/make_datasets/rejected.jsonl``
(removed rows, with reasons); metrics: ``reports/make_datasets/metrics.json`` (counts per dataset,
split, source and filter; contamination counts; missing inputs).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from pipelines.stage import run_stage, stage_setup, write_metrics
from pipelines.tracking import stage_run
from pipelines.training.dataset_builder import MakeDatasetsConfig, build_datasets
from pipelines.training.dataset_targets import targets_from_params
from pipelines.training.eval_items import system_items
from pipelines.training.families import FamilyError

log = logging.getLogger("edumas")


def _run(argv: list[str] | None) -> int:
    args, cfg = stage_setup("make_datasets", "make_datasets", MakeDatasetsConfig, argv)
    targets = targets_from_params(cfg.targets, args.params, output_dir=cfg.output_dir)
    config = cfg.model_dump() | {"resolved_targets": {kind: t.model_dump() for kind, t in targets.items()}}
    with stage_run("make_datasets", config) as run:
        try:
            systems = cfg.contamination.systems if cfg.contamination.enabled else []
            items, not_checked = system_items(systems, args.params)
            metrics = build_datasets(cfg, targets, eval_items=items)
            metrics["contamination"]["not_checked"] = not_checked
        except (FileNotFoundError, FamilyError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if metrics["inputs_missing"]:
            log.warning("optional inputs missing (see the data card): %s", ", ".join(metrics["inputs_missing"]))
        write_metrics(Path(cfg.reports_dir) / "metrics.json", metrics, run)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit code 0, 2 (bad params) or 1 (one ``error: ...`` line; ``--debug`` adds the traceback)."""
    return run_stage(lambda: _run(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())
