"""DVC stage ``generate_ram2c``: tutoring dialogues refined by the T/P/E expert groups, as DPO pairs.

Reads the ``ram2c`` section of params.yaml (:class:`pipelines.ram2c.config.Ram2cConfig`) and the
``build_kb`` and ``retrieval`` sections (the knowledge bases the groups read), runs
:class:`pipelines.ram2c.interface.RAM2C` (the team interface over :mod:`pipelines.ram2c.run`; its
``configure`` puts ``ram2c.n_rewrites`` into the retrieval section) and writes, under
``ram2c.outputs`` (defaults in the config, the files listed in dvc.yaml):

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

from pipelines.agents.generate_stage import exit_stage_process, run_generate_stage
from pipelines.ram2c.interface import TEAM


def main(argv: list[str] | None = None) -> int:
    return run_generate_stage(TEAM, argv)


if __name__ == "__main__":
    exit_stage_process(main())
