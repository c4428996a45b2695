"""Throughput of the tagging team against an OpenAI-compatible server with a fixed latency.

300 questions (the demo set, cycled with distinct ids), the runner at concurrency 64, the
``openai`` backend talking to :class:`pipelines.llm.loopback.LoopbackServer` on loopback, which
answers each agent's prompt with a well-formed reply after ``--latency`` seconds. The plan per
definition is one semantic and one numerical sub-constraint, so a question costs solver +
semantic judge + argument extractor + program writer (+ one planner call per definition) and
one sandbox run. The dependent chain of one question is planner|solver -> extractor -> writer
-> sandbox: depth 3 LLM calls.

Prints the wall time, the lower bound max(depth x latency, ceil(calls / concurrency) x latency)
and their ratio (goal <= 1.3). Sandbox runs are inside the measured wall time.

    python benchmarks/tagging_throughput.py [--questions 300] [--concurrency 64] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.agents import Runner  # noqa: E402
from pipelines.llm.client import LLMRuntime  # noqa: E402
from pipelines.llm.config import LLMConfig  # noqa: E402
from pipelines.llm.loopback_process import LoopbackProcess, loopback_spec  # noqa: E402
from pipelines.tagging.data import TaggingDataConfig, TaggingExample, read_examples  # noqa: E402
from pipelines.tagging.team import TaggingTeam, TeamConfig  # noqa: E402

DEPTH = 3


def reply(body: dict) -> str:
    """A well-formed reply for whichever agent sent the prompt (chosen by its system message)."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    question = re.split(r"Question: |题目：", user, maxsplit=1)[-1]  # the numbers of the question, not the definition
    numbers = [int(n) for n in re.findall(r"\d+", question.split("Solution", 1)[0].split("解答", 1)[0])] or [0]
    if "task planner" in system or "任务规划者" in system:
        return (
            "<semantic> Does the question ask for the operation in the definition?\n"
            "<numerical> Is the first number below 100?"
        )
    if "question solver" in system or "解题者" in system:
        return f"Use the numbers {numbers}. Final answer: {sum(numbers)}"
    if "semantic judge" in system or "语义判断者" in system:
        return "The question asks for the operation in the definition. <Yes>"
    if "First step" in system or "第一步" in system:
        return json.dumps({"first_number": numbers[0]})
    if "Second step" in system or "第二步" in system:
        return "```python\nprint(first_number < 100)\n```"
    return "<No>"


def questions(n: int) -> list[TaggingExample]:
    base = read_examples(TaggingDataConfig(), ROOT)
    out = []
    for i in range(n):
        e = base[i % len(base)]
        out.append(
            TaggingExample(f"{e.id}-{i}", e.knowledge_id, e.definition, f"{e.question} (#{i})", e.label, e.language)
        )
    return out




async def main(args: argparse.Namespace) -> dict:
    # the server gets its own process (as a real one would): its CPU does not slow the client
    server = LoopbackProcess(latency_s=args.latency, reply=reply).start()
    url = server.url
    spec = loopback_spec(url, concurrency=args.concurrency)
    runtime = LLMRuntime(LLMConfig(default=spec, cache=None))
    team = TaggingTeam(runtime.for_role, TeamConfig(sandbox_concurrency=args.sandbox_concurrency))
    examples = questions(args.questions)
    start = time.perf_counter()
    report = await Runner(args.concurrency, desc="tagging benchmark", progress=not args.quiet).run(
        examples, team.tag, sample_id=lambda e: e.id
    )
    wall = time.perf_counter() - start
    await runtime.close()
    calls = server.stop()
    sandbox_runs = sum(1 for row in report.trace_rows() if "sandbox" in row)
    bound = max(DEPTH * args.latency, math.ceil(calls / args.concurrency) * args.latency)
    result = {
        "questions": len(examples),
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "llm_calls": calls,
        "sandbox_runs": sandbox_runs,
        "failed_samples": report.failures,
        "failed_subtasks": sum(r.failures for r in report.results if r is not None),
        "peak_calls_in_flight": report.peak_concurrency,
        "depth": DEPTH,
        "wall_s": round(wall, 2),
        "lower_bound_s": bound,
        "ratio": round(wall / bound, 3),
    }
    print(json.dumps(result, indent=1))
    print(f"wall {wall:.2f} s, lower bound {bound:.1f} s, ratio {wall / bound:.3f} (goal <= 1.3)")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--sandbox-concurrency", type=int, default=16)
    parser.add_argument("--quiet", action="store_true")
    asyncio.run(main(parser.parse_args()))
