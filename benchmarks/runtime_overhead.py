"""Benchmark: client-side overhead of the LLM runtime (LLM + request cache + OpenAIBackend) over HTTP.

A loopback OpenAI-compatible server answers every request after exactly ``L`` seconds with no
concurrency limit, so a perfect client finishes ``K`` requests at concurrency ``C`` in
``ceil(K / C) * L`` seconds; whatever exceeds that is the runtime's own cost (request keys, JSON,
HTTP, the SQLite cache put per request, accounting, garbage collection). Two cases by default
(``--cases``), each against its own server process:

- 2,000 requests at 256 in flight: goal ``ceil(K/C) * L * 1.05`` = 8.4 s;
- 20,000 requests at 1,024 in flight: goal ``* 1.10`` = 22 s;

and for each, the same requests replayed from the cache in under ``cache_goal_s`` (default 2 s).

The server runs in a separate process (``python -m pipelines.llm.loopback``): in production the
server is another machine, and sharing one event loop would bill the server's parsing and reply
building to the client. Both processes share the machine's cores, so the figure is conservative.

    python benchmarks/runtime_overhead.py                     # both cases, L=1.0
    python benchmarks/runtime_overhead.py --cases 2000x256:1.05
    python benchmarks/runtime_overhead.py -K 500 -C 64 -L 0.5 --profile   # one case (goal --slack)

Prints, per case, both wall times, the ratio to the bound, the client's CPU per request and the
time its garbage collector paused it, and the load average (docs/benchmarks.md: measure on an idle
machine); exits 1 if a goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import math
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pipelines.agents  # noqa: E402, F401  (loaded by every stage before its first call; the client imports it lazily)
from pipelines.llm.cache import RequestCache  # noqa: E402
from pipelines.llm.client import LLM  # noqa: E402
from pipelines.llm.loopback_process import loopback_spec  # noqa: E402
from pipelines.llm.openai_backend import OpenAIBackend  # noqa: E402
from pipelines.llm.types import SamplingParams  # noqa: E402


def start_server(latency_s: float) -> tuple[subprocess.Popen, str]:
    """The loopback server in its own process; returns it and its base URL (from its READY line)."""
    command = [sys.executable, "-m", "pipelines.llm.loopback", "--latency", str(latency_s), "--no-record"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip() if proc.stdout else ""
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"loopback server did not start (got {line!r})")
    return proc, line.split(" ", 1)[1]


async def run_batch(llm: LLM, prompts: list[str], params: SamplingParams) -> tuple[float, float, int]:
    """Send all prompts at once (the backend bounds concurrency); returns (wall s, client CPU s, cache hits)."""
    start, cpu_start = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(llm.chat([{"role": "user", "content": p}], params) for p in prompts))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    for prompt, result in zip(prompts, results, strict=True):
        if result.text != f"echo: {prompt}":
            raise SystemExit(f"wrong reply {result.text!r} for {prompt!r}")
    return wall, cpu, sum(r.cached for r in results)


async def benchmark(args: argparse.Namespace, url: str, cache_path: Path) -> dict[str, float]:
    spec = loopback_spec(url, concurrency=args.concurrency, timeout_s=max(30.0, 10 * args.latency))
    backend = OpenAIBackend(spec)
    cache = RequestCache(cache_path)
    llm = LLM(backend, role="bench", cache=cache)
    prompts = [f"question {i}: what is {i} + {i}?" for i in range(args.requests)]
    params = SamplingParams(max_tokens=64)
    profiler = cProfile.Profile() if args.profile else None
    try:
        if profiler:
            profiler.enable()
        fresh_s, fresh_cpu, fresh_hits = await run_batch(llm, prompts, params)
        if profiler:
            profiler.disable()
        cached_s, cached_cpu, cached_hits = await run_batch(llm, prompts, params)
    finally:
        await backend.close()
        cache.close()
    if fresh_hits != 0 or cached_hits != args.requests:
        raise SystemExit(f"cache misbehaved: {fresh_hits} hits on fresh run, {cached_hits}/{args.requests} on replay")
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(40)
        print(out.getvalue())
    return {
        "fresh_s": fresh_s,
        "fresh_cpu_s": fresh_cpu,
        "cached_s": cached_s,
        "cached_cpu_s": cached_cpu,
        "retries": backend.retries,
    }


def run_case(args: argparse.Namespace, requests: int, concurrency: int, slack: float) -> bool:
    """One case against its own server; prints its lines, returns whether both goals were met."""
    case = argparse.Namespace(**{**vars(args), "requests": requests, "concurrency": concurrency})
    ideal = math.ceil(requests / concurrency) * args.latency
    load_before = os.getloadavg()[0]
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc, url = start_server(args.latency)
    pauses = _GCPauses()
    try:
        with tempfile.TemporaryDirectory() as tmp, pauses:
            res = asyncio.run(benchmark(case, url, Path(tmp) / "cache.sqlite"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = children.ru_utime + children.ru_stime - children_before.ru_utime - children_before.ru_stime
    fresh_s, cached_s, k = res["fresh_s"], res["cached_s"], requests
    fresh_ok = fresh_s <= slack * ideal
    cached_ok = cached_s < args.cache_goal
    print(f"K={k} C={concurrency} L={args.latency}s  ideal ceil(K/C)*L = {ideal:.2f}s  retries={res['retries']}")
    print(
        f"fresh : {fresh_s:.2f}s  ratio {fresh_s / ideal:.3f} (goal <= {slack})  {k / fresh_s:.0f} req/s  "
        f"client CPU {res['fresh_cpu_s']:.2f}s = {1e6 * res['fresh_cpu_s'] / k:.0f} us/request  "
        f"{'OK' if fresh_ok else 'MISSED'}"
    )
    print(
        f"cached: {cached_s:.3f}s  {1e6 * cached_s / k:.0f} us/request wall, "
        f"{1e6 * res['cached_cpu_s'] / k:.0f} us/request CPU (goal < {args.cache_goal}s)  "
        f"{'OK' if cached_ok else 'MISSED'}"
    )
    print(
        f"garbage collection paused the client {1000 * pauses.total_s:.0f} ms ({pauses.count} collections, "
        f"longest {1000 * pauses.longest_s:.0f} ms); server CPU (incl. start-up) {server_cpu:.2f}s; "
        f"1-min load average before/after {load_before:.1f}/{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
        "(a load above the CPU count starves both processes and inflates the fresh wall time)"
    )
    return fresh_ok and cached_ok


class _GCPauses:
    """Counts the garbage collector's pauses while active (``with``)."""

    def __init__(self) -> None:
        self.count, self.total_s, self.longest_s, self._start = 0, 0.0, 0.0, 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        pause = time.perf_counter() - self._start
        self.count += 1
        self.total_s += pause
        self.longest_s = max(self.longest_s, pause)

    def __enter__(self) -> _GCPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def parse_cases(text: str) -> list[tuple[int, int, float]]:
    """``2000x256:1.05,20000x1024:1.10`` -> [(2000, 256, 1.05), (20000, 1024, 1.1)]."""
    cases = []
    for item in text.split(","):
        size, _, slack = item.partition(":")
        requests, _, concurrency = size.partition("x")
        cases.append((int(requests), int(concurrency), float(slack or 1.15)))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="2000x256:1.05,20000x1024:1.10", help="KxC:slack,... (the goals)")
    parser.add_argument("-K", "--requests", type=int, default=None, help="one case of K requests (with -C, --slack)")
    parser.add_argument("-C", "--concurrency", type=int, default=256, help="backend max_concurrency (with -K)")
    parser.add_argument("-L", "--latency", type=float, default=1.0, help="server latency per request (s)")
    parser.add_argument("--slack", type=float, default=1.15, help="allowed wall / ideal ratio (with -K)")
    parser.add_argument("--cache-goal", type=float, default=2.0, help="max seconds to replay K cached requests")
    parser.add_argument("--profile", action="store_true", help="cProfile the fresh run (slows it down)")
    args = parser.parse_args(argv)
    cases = [(args.requests, args.concurrency, args.slack)] if args.requests else parse_cases(args.cases)
    results = [run_case(args, k, c, slack) for k, c, slack in cases]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
