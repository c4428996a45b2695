"""DVC stage ``generate_ram2c``: tutoring dialogues refined by the T/P/E expert groups, as DPO pairs.

Reads the ``ram2c`` section of params.yaml (:class:`pipelines.ram2c.config.Ram2cConfig`) and the
``build_kb`` and ``retrieval`` sections (the knowledge bases the groups read), runs
:func:`pipelines.ram2c.run.generate_ram2c` and writes, under ``ram2c.outputs`` (defaults in the
config, the files listed in dvc.yaml):

- ``data/generated/ram2c/{dpo,sft,dialogues,dropped,traces,predictions}.jsonl``, ``preference/``
  (datasets), ``llamafactory/`` (sharegpt + dataset_info.json), ``topics/``
- ``reports/generate_ram2c/{metrics.json,usage.json,failures.json}``

    python -m stages.generate_ram2c [--params params.yaml] [--section ram2c] [--shard I/N] [--debug]

``--shard I/N`` runs shard I of N only, into ``shards/I-of-N/`` under both output folders; merge
the shards with ``python -m stages.merge_shards --team ram2c`` (docs/runtime.md: Sharded generation).

Exit codes: 0 done; 1 a missing input (knowledge base, source text), an LLM failure or more failed
samples than ``max_failed_share``; 2 bad params.
"""

from __future__ import annotations

from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.run import generate_ram2c
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.stage import run_generate_stage

SECTIONS = {"ram2c": Ram2cConfig, "build_kb": BuildKBConfig, "retrieval": RetrievalConfig}


def summary_line(metrics: dict) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in metrics["dropped_by_reason"].items()) or "none"
    return (
        f"{metrics['dialogues']} dialogues, {metrics['pairs_kept']} pairs kept, {metrics['pairs_dropped']} dropped "
        f"({reasons}); {metrics['llm_calls_per_dialogue']} LLM calls per dialogue; {metrics['wall_s']} s"
    )


def main(argv: list[str] | None = None) -> int:
    generate = lambda cfgs: generate_ram2c(cfgs["ram2c"], cfgs["build_kb"], cfgs["retrieval"])  # noqa: E731
    return run_generate_stage("generate_ram2c", SECTIONS, generate, summary_line, argv)


if __name__ == "__main__":
    raise SystemExit(main())
