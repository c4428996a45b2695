"""Throughput of the CooperKGC team against an OpenAI-compatible server with a fixed latency.

200 sentences (the project's English and Chinese demo sets, cycled with distinct texts) x 3
experts x (4 + 1) rounds, the runner at concurrency 64, the ``openai`` backend talking to
:class:`pipelines.llm.loopback.LoopbackServer` (in its own process) on loopback, which answers each
expert's prompt with a well-formed reply in the paper's format after ``--latency`` seconds. The
dependent chain of one sentence is its rounds: depth rounds + 1 calls.

Prints the wall time, the lower bound max((rounds + 1) x latency, ceil(calls / concurrency) x
latency) and their ratio (goal <= 1.15).

    python benchmarks/kgc_throughput.py [--sentences 200] [--rounds 4] [--concurrency 64] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.agents import Runner  # noqa: E402
from pipelines.kgc.datasets import DatasetConfig, load_dataset  # noqa: E402
from pipelines.kgc.schema import SCHEMA_DIR, load_schema  # noqa: E402
from pipelines.kgc.team import CooperKGC, TeamConfig  # noqa: E402
from pipelines.llm.client import LLMRuntime  # noqa: E402
from pipelines.llm.config import LLMConfig  # noqa: E402
from pipelines.llm.loopback_process import LoopbackProcess, loopback_spec  # noqa: E402

DEMO = [
    ("conllpp", "conll", "ner_en.conll", None),
    ("nyt11_hrl", "nyt11_hrl", "re_en.nyt.jsonl", None),
    ("ace05", "ace05", "ee_en.oneie.jsonl", None),
    ("msra", "msra", "ner_zh.msra.txt", None),
    ("duie2", "duie", "re_zh.duie.jsonl", None),
    ("duee1", "duee", "ee_zh.duee.jsonl", "ee_zh.duee_schema.jsonl"),
]


def reply(body: dict) -> str:
    """A well-formed answer for whichever expert sent the prompt (chosen by its system message)."""
    system = body["messages"][0]["content"]
    if "named entity recognition task" in system or "命名实体识别任务" in system:
        return "[(PER, Lionel Messi), (LOC, Rosario)]"
    if "relation extraction task" in system or "关系抽取任务" in system:
        return "[(Argentina, /location/location/contains, Rosario)]"
    return "[{Trigger Type: Life:Be-Born, Trigger Word: Born, Arguments: [(Person, Lionel Messi)]}]"


def sentences(n: int):
    schemas = {p.stem: load_schema(p.stem) for p in SCHEMA_DIR.glob("*.json")}
    base = []
    for name, fmt, file, schema_file in DEMO:
        cfg = DatasetConfig(
            name=name,
            format=fmt,
            files=[str(ROOT / "data/kgc" / file)],
            schema_file=str(ROOT / "data/kgc" / schema_file) if schema_file else None,
        )
        dataset = load_dataset(cfg)
        schemas[name] = dataset.schema
        base.extend(dataset.sentences)
    out = [
        dataclasses.replace(base[i % len(base)], id=f"s{i}", text=f"{base[i % len(base)].text} (#{i})")
        for i in range(n)
    ]
    return out, schemas




async def main(args: argparse.Namespace) -> dict:
    server = LoopbackProcess(latency_s=args.latency, reply=reply).start()
    url = server.url
    spec = loopback_spec(url, concurrency=args.concurrency)
    runtime = LLMRuntime(LLMConfig(default=spec, cache=None))
    items, schemas = sentences(args.sentences)
    team = CooperKGC(runtime.for_role, TeamConfig(rounds=args.rounds), schemas, mode="text")
    start = time.perf_counter()
    report = await Runner(args.concurrency, desc="kgc benchmark", progress=not args.quiet).run(
        items, team.run, sample_id=lambda s: s.id
    )
    wall = time.perf_counter() - start
    await runtime.close()
    calls = server.stop()
    depth = args.rounds + 1
    bound = max(depth * args.latency, math.ceil(calls / args.concurrency) * args.latency)
    result = {
        "sentences": len(items),
        "experts": 3,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "llm_calls": calls,
        "failed_samples": report.failures,
        "failed_calls": sum(r.failed for r in report.results if r is not None),
        "peak_calls_in_flight": report.peak_concurrency,
        "wall_s": round(wall, 2),
        "lower_bound_s": bound,
        "ratio": round(wall / bound, 3),
    }
    print(json.dumps(result, indent=1))
    print(f"wall {wall:.2f} s, lower bound {bound:.1f} s, ratio {wall / bound:.3f} (goal <= 1.15)")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--quiet", action="store_true")
    asyncio.run(main(parser.parse_args()))
