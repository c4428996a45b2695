"""DVC stage ``generate_tagging``: the multi-agent knowledge-tagging team and its baselines.

Reads the ``tagging`` section of params.yaml (see :class:`pipelines.tagging.config.TaggingConfig`),
runs :class:`pipelines.tagging.interface.Tagging` (the team interface over
:mod:`pipelines.tagging.run`) and writes, under ``tagging.outputs`` (defaults in the config, the
files listed in dvc.yaml):

- ``data/generated/tagging/{predictions,traces,sft}.jsonl``
- ``reports/generate_tagging/{metrics.json,usage.json,failures.json,table.md,metrics.png}``

    python -m stages.generate_tagging [--params params.yaml] [--section tagging] [--shard I/N] [--debug]

``--shard I/N`` runs shard I of N only, into ``shards/I-of-N/`` under both output folders; merge
the shards with ``python -m stages.merge_shards --team tagging`` (docs/runtime.md: Sharded generation).

Exit codes: 0 done; 1 a missing input, an LLM failure (server down, missing API key, corrupt
cache), an empty evaluation set or more failed samples than ``max_failed_share``; 2 bad params.
"""

from __future__ import annotations

from pipelines.agents.generate_stage import exit_stage_process, run_generate_stage
from pipelines.tagging.interface import TEAM


def main(argv: list[str] | None = None) -> int:
    return run_generate_stage(TEAM, argv)


if __name__ == "__main__":
    exit_stage_process(main())
