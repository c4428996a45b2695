"""DVC stage ``generate_tagging``: the multi-agent knowledge-tagging team and its baselines.

Reads the ``tagging`` section of params.yaml (see :class:`pipelines.tagging.config.TaggingConfig`),
runs :func:`pipelines.tagging.run.generate_tagging` and writes, under ``tagging.outputs``
(defaults in the config, the files listed in dvc.yaml):

- ``data/generated/tagging/{predictions,traces,sft}.jsonl``
- ``reports/generate_tagging/{metrics.json,usage.json,failures.json,table.md,metrics.png}``

    python -m stages.generate_tagging [--params params.yaml] [--section tagging] [--shard I/N] [--debug]

``--shard I/N`` runs shard I of N only, into ``shards/I-of-N/`` under both output folders; merge
the shards with ``python -m stages.merge_shards --team tagging`` (docs/runtime.md: Sharded generation).

Exit codes: 0 done; 1 a missing input, an LLM failure (server down, missing API key, corrupt
cache), an empty evaluation set or more failed samples than ``max_failed_share``; 2 bad params.
"""

from __future__ import annotations

from pipelines.agents.generate_stage import run_generate_stage
from pipelines.agents.shortfalls import count_shortfall, unparseable_shortfalls
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging


def summary_line(metrics: dict) -> str:
    parts = [
        f"{name}: acc {m['overall']['accuracy']:.3f} F1 {m['overall']['f1']:.3f} "
        f"coverage {m['overall'].get('coverage', 1.0):.2f}"
        for name, m in metrics["systems"].items()
    ]
    return (
        f"{metrics['n_evaluated']} pairs evaluated ({metrics['output_mode']} mode, "
        f"failures count as {metrics.get('failure_outcome', 'wrong')}); "
        + "; ".join(parts)
        + f"; {metrics['sft_rows']} SFT rows from {metrics.get('n_generation_run', 0)} generation pairs"
    )


def shortfalls(cfgs: dict, metrics: dict) -> list:
    """Per system: pairs answered vs evaluated, and unparseable replies per role."""
    found = []
    for name, system in metrics["systems"].items():
        overall = system["overall"]
        if "answered" in overall:
            cause = f"{overall.get('failed', 0)} failed, counted as {metrics.get('failure_outcome', 'wrong')}"
            found.append(count_shortfall(f"{name}: evaluated pairs answered", overall["n"], overall["answered"],
                                         cause=cause))  # fmt: skip
        found += unparseable_shortfalls({f"{name}: {role}": c for role, c in (system.get("unparseable") or {}).items()})
    return found


def main(argv: list[str] | None = None) -> int:
    generate = lambda cfgs: generate_tagging(cfgs["tagging"])  # noqa: E731
    return run_generate_stage(
        "generate_tagging", {"tagging": TaggingConfig}, generate, summary_line, argv, shortfalls=shortfalls
    )


if __name__ == "__main__":
    raise SystemExit(main())
