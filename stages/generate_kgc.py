"""DVC stage ``generate_kgc``: CooperKGC (NER, RE and EE experts over rounds) and its baselines.

Reads the ``kgc`` section of params.yaml (see :class:`pipelines.kgc.config.KGCConfig`), runs
:func:`pipelines.kgc.run.generate_kgc` and writes, under ``kgc.outputs`` (defaults in the config,
the files listed in dvc.yaml):

- ``data/generated/kgc/{predictions,traces,sft}.jsonl``
- ``reports/generate_kgc/{metrics,usage,failures,datasets}.json``, ``{table,per_type}.md``, ``rounds.{csv,png}``

    python -m stages.generate_kgc [--params params.yaml] [--section kgc] [--shard I/N] [--debug]

``--shard I/N`` runs shard I of N only, into ``shards/I-of-N/`` under both output folders; merge
the shards with ``python -m stages.merge_shards --team kgc`` (docs/runtime.md: Sharded generation).

Exit codes: 0 done; 1 a missing input, an unreadable dataset file or one whose gold is empty or mostly
unknown labels, an LLM failure or more failed samples than ``max_failed_share``; 2 bad params.
"""

from __future__ import annotations

from pipelines.agents.generate_stage import run_generate_stage
from pipelines.agents.shortfalls import Shortfall, count_shortfall, unparseable_shortfalls
from pipelines.kgc.config import KGCConfig
from pipelines.kgc.datasets import ReaderError
from pipelines.kgc.run import generate_kgc
from pipelines.stage import StageError


def summary_line(metrics: dict) -> str:
    parts = []
    for name, system in metrics["systems"].items():
        f1 = ", ".join(f"{d} {100 * s['overall']['f1']:.1f}" for d, s in system["datasets"].items())
        parts.append(f"{name}: {f1}")
    return (
        f"{metrics['n_evaluated']} sentences ({metrics['output_mode']} mode); F1 % "
        + "; ".join(parts)
        + f"; {metrics['sft_rows']} SFT rows"
    )


def _generate(cfgs: dict) -> dict:
    try:
        return generate_kgc(cfgs["kgc"])
    except ReaderError as exc:  # a file that cannot be read or scored (GoldError): the file in the message
        raise StageError(str(exc)) from exc


def shortfalls(cfgs: dict, metrics: dict) -> list:
    """Sentences evaluated per dataset vs its ``sample``, datasets left out, sentences without an
    SFT row and SFT rows whose answer scored F1 0, failed sentences and unparseable replies per
    system and role."""
    found: list = []
    for dataset in cfgs["kgc"].datasets:
        info = metrics["datasets"].get(dataset.name)
        if info is not None and dataset.evaluate and dataset.sample is not None:
            found.append(count_shortfall(f"{dataset.name} sentences evaluated", dataset.sample, info["evaluated"],
                                         cause=f"the dataset holds {info.get('pool', '?')}"))  # fmt: skip
    found += [Shortfall(f"dataset {name} left out", cause="its files are missing") for name in metrics["left_out"]]
    sft = cfgs["kgc"].sft
    why = f"no qualifying final answer (kgc.sft.keep {sft.keep}, min_f1 {sft.min_f1})"
    found.append(count_shortfall("sentences giving an SFT row", metrics["n_evaluated"], metrics.get("sft_rows"),
                                 cause=why))  # fmt: skip
    rows, zero = metrics.get("sft_rows") or 0, metrics.get("sft_f1_zero") or 0
    found.append(count_shortfall("SFT rows whose answer scores F1 > 0", rows, rows - zero,
                                 cause=f"{zero} scored sentence F1 0 (kgc.sft.min_f1 {sft.min_f1})"))  # fmt: skip
    for name, system in metrics["systems"].items():
        found.append(count_shortfall(f"{name}: sentences without a failure", metrics["n_evaluated"],
                                     metrics["n_evaluated"] - system.get("failed_samples", 0)))  # fmt: skip
        found += unparseable_shortfalls({f"{name}: {role}": c for role, c in (system.get("unparseable") or {}).items()})
    return found


def main(argv: list[str] | None = None) -> int:
    return run_generate_stage("generate_kgc", {"kgc": KGCConfig}, _generate, summary_line, argv, shortfalls=shortfalls)


if __name__ == "__main__":
    raise SystemExit(main())
