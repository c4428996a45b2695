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

from pipelines.agents.generate_stage import run_generate_stage
from pipelines.agents.shortfalls import count_shortfall
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.run import generate_ram2c
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig

SECTIONS = {"ram2c": Ram2cConfig, "build_kb": BuildKBConfig, "retrieval": RetrievalConfig}


def summary_line(metrics: dict) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in metrics["dropped_by_reason"].items()) or "none"
    return (
        f"{metrics['dialogues']} dialogues, {metrics['pairs_kept']} pairs kept, {metrics['pairs_dropped']} dropped "
        f"({reasons}); {metrics['llm_calls_per_dialogue']} LLM calls per dialogue; {metrics['wall_s']} s"
    )


def shortfalls(cfgs: dict, metrics: dict) -> list:
    """Dialogues requested vs finished (and why: topics not written or dropped), pairs kept vs turns run."""
    unwritten = metrics["topics_planned"] - metrics["topics_written"]
    causes = [f"{unwritten} of {metrics['topics_planned']} topic questions not written (replies did not parse)"]
    causes = causes[:1] if unwritten else []
    causes += [f"{n} topics dropped ({reason})" for reason, n in metrics["topics_dropped"].items()]
    if metrics["dialogues_failed"]:
        causes.append(f"{metrics['dialogues_failed']} dialogues failed")
    finished = metrics["dialogues"] - metrics["dialogues_failed"]
    dropped = ", ".join(f"{reason} {n}" for reason, n in metrics["dropped_by_reason"].items())
    return [
        count_shortfall("dialogues", cfgs["ram2c"].dialogues, finished, cause="; ".join(causes)),
        count_shortfall("preference pairs (one per turn)", metrics["turns"], metrics["pairs_kept"],
                        cause=f"dropped by the quality gates: {dropped}" if dropped else ""),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    generate = lambda cfgs: generate_ram2c(cfgs["ram2c"], cfgs["build_kb"], cfgs["retrieval"])  # noqa: E731
    return run_generate_stage("generate_ram2c", SECTIONS, generate, summary_line, argv, shortfalls=shortfalls)


if __name__ == "__main__":
    raise SystemExit(main())
