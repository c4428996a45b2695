"""DVC stage ``generate_kgc``: CooperKGC (NER, RE and EE experts over rounds) and its baselines.

Reads the ``kgc`` section of params.yaml (see :class:`pipelines.kgc.config.KGCConfig`), runs
:class:`pipelines.kgc.interface.KGC` (the team interface over :mod:`pipelines.kgc.run`) and writes,
under ``kgc.outputs`` (defaults in the config, the files listed in dvc.yaml):

- ``data/generated/kgc/{predictions,traces,sft}.jsonl``
- ``reports/generate_kgc/{metrics,usage,failures,datasets}.json``, ``{table,per_type}.md``, ``rounds.{csv,png}``

    python -m stages.generate_kgc [--params params.yaml] [--section kgc] [--shard I/N] [--debug]

``--shard I/N`` runs shard I of N only, into ``shards/I-of-N/`` under both output folders; merge
the shards with ``python -m stages.merge_shards --team kgc`` (docs/runtime.md: Sharded generation).

Exit codes: 0 done; 1 a missing input, an unreadable dataset file or one whose gold is empty or mostly
unknown labels, an LLM failure or more failed samples than ``max_failed_share``; 2 bad params.
"""

from __future__ import annotations

from pipelines.agents.generate_stage import exit_stage_process, run_generate_stage
from pipelines.kgc.interface import TEAM


def main(argv: list[str] | None = None) -> int:
    return run_generate_stage(TEAM, argv)


if __name__ == "__main__":
    exit_stage_process(main())
