"""Per-run overhead of the code sandbox: latency p50/p95 one at a time, and runs/s at concurrency 8.

Usage: ``python -m benchmarks.sandbox_overhead [--runs 64] [--concurrency 8]``. Prints one JSON
object. The program is a typical numerical-judge check (fractions + math, prints a verdict), so
the figures are the sandbox's cost per judged sample, not the cost of the check itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import numpy as np

from pipelines.agents.sandbox import SandboxLimits, isolation, run_python

PROGRAM = """\
import math
from fractions import Fraction
total = sum(Fraction(1, n * (n + 1)) for n in range(1, 50))
print(total == Fraction(49, 50) and math.isclose(float(total), 0.98))
"""


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, 100 * q))


async def measure(runs: int, concurrency: int) -> dict:
    limits = SandboxLimits()
    await run_python(PROGRAM, limits)  # warm-up: bytecode caches, namespace probe
    latencies = []
    for _ in range(runs):
        result = await run_python(PROGRAM, limits)
        assert result.verdict is True, result
        latencies.append(result.duration_s)
    gate = asyncio.Semaphore(concurrency)

    async def one() -> bool | None:
        async with gate:
            return (await run_python(PROGRAM, limits)).verdict

    start = time.perf_counter()
    verdicts = await asyncio.gather(*(one() for _ in range(runs)))
    elapsed = time.perf_counter() - start
    assert all(verdicts), verdicts
    return {
        "runs": runs,
        "namespaces": " ".join(isolation().namespace_flags),
        "user": isolation().user,
        "latency_p50_s": round(statistics.median(latencies), 4),
        "latency_p95_s": round(percentile(latencies, 0.95), 4),
        "concurrency": concurrency,
        "runs_per_s": round(runs / elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.runs, args.concurrency)), indent=2))


if __name__ == "__main__":
    main()
