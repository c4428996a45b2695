"""Throughput of RAM2C dialogue generation against an OpenAI-compatible server with a fixed latency.

50 single-turn dialogues (topics written first, then student -> drafter -> T -> P -> E groups of 3
experts, 3 candidate documents each, one ballot call per expert), the harness at concurrency 128,
the ``openai`` backend in json mode talking to :class:`pipelines.llm.loopback.LoopbackServer` (its
own process), which answers every agent with a well-formed reply after ``--latency`` seconds.
Retrieval is the real :class:`Retriever` (query rewriter, Chroma, RRF) on a store built from
``data/kb_sources`` with a small hashing embedder, so the benchmark needs no model files.

The longest chain of dependent calls is topic, student, drafter (the turn's one query rewrite runs
beside it), then per group votes -> expert -> synthesis, where the expert step is one call with
``expert_call: joint`` (the default: analysis and revision in one reply) and two with ``separate``
(analysis, then revision): depth 3 + 3 x 3 = 12, or 3 + 3 x 4 = 15 (the votes of all experts are
concurrent, whether one ballot per expert or one call per document). Prints the wall time, the
lower bound max(depth x latency, ceil(calls / concurrency) x latency), their ratio (goal <= 1.15)
and the LLM calls per dialogue; the wall time of the two harness phases alone (without preflight,
topic deduplication and the final datasets / LLaMA-Factory exports) is shown beside it, and so is
the schedule floor (:func:`greedy_rounds`: what the limiter needs when calls cost nothing but their
latency; at 50 dialogues x 3 experts each expert step is 150 calls wide, more than 128 slots, so the
floor is 13 s against the bound's 12 s with ``joint``, 17 s against 15 s with ``separate``).
``datasets`` is imported before the clock starts (a process start-up cost of 2-3 s on a loaded
2-core machine, not generation work). Measured figures: docs/benchmarks.md.

    python benchmarks/ram2c_throughput.py [--dialogues 50] [--concurrency 128] [--latency 1.0]
        [--candidates 3] [--vote-call per_expert|per_document] [--expert-call joint|separate]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.config import load_section  # noqa: E402
from pipelines.llm.client import LLMRuntime  # noqa: E402
from pipelines.llm.config import LLMConfig  # noqa: E402
from pipelines.llm.loopback_process import LoopbackProcess, loopback_spec  # noqa: E402
from pipelines.ram2c.config import Ram2cConfig  # noqa: E402
from pipelines.ram2c.run import generate_ram2c_async  # noqa: E402
from pipelines.retrieval.build import build_knowledge_base  # noqa: E402
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig  # noqa: E402
from pipelines.retrieval.embedders import Encoded  # noqa: E402
from pipelines.retrieval.service import open_retriever  # noqa: E402

GROUPS = 3
EXPERT_STEPS = {"joint": 1, "separate": 2}  # dependent calls of one expert after the votes
DOCUMENT = re.compile(r"^Document (\d+):$", re.M)


class HashingEmbedder:
    """Character trigrams hashed into 256 dims (no model files); deterministic."""

    identity = "hashing-trigram:256"

    def _vectors(self, texts: list[str]) -> Encoded:
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for row, text in enumerate(texts):
            for i in range(max(1, len(text) - 2)):
                out[row, int(hashlib.md5(text[i : i + 3].encode()).hexdigest()[:6], 16) % 256] += 1
        return Encoded(out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12))

    encode_documents = encode_queries = _vectors


def reply(body: dict) -> str:
    """A well-formed reply for whichever agent sent the prompt (chosen by its system message)."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "You write discussion questions" in system:
        return json.dumps({"question": f"What did the hero feel at this point ({abs(hash(user)) % 10**8})?"})
    if "You play a student" in system:
        return json.dumps({"reply": "I think he was brave but also lonely on the island."})
    if "You are a literature teacher discussing" in system:
        return json.dumps({"reply": "Nice idea! Why do you think he felt lonely?"})
    if "Judge one document only" in system:
        return json.dumps({"vote": "yes" if len(user) % 2 else "no", "reason": "style"})
    if "Judge every document" in system:
        numbers = DOCUMENT.findall(user)
        return json.dumps({n: "yes" if (len(user) + int(n)) % 2 else "no" for n in numbers})
    if "Answer in two parts" in system:
        return json.dumps(
            {
                "analysis": "The student notices feelings; the reply could ask for evidence.",
                "reply": "You noticed his feelings well! What in the story shows he was lonely?",
            }
        )
    if "analyse explicitly" in system:
        return json.dumps({"analysis": "The student notices feelings; the reply could ask for evidence."})
    if "rewrite the teacher's reply" in system:
        return json.dumps({"reply": "You noticed his feelings well! What in the story shows he was lonely?"})
    if "You merge several improved versions" in system:
        return json.dumps({"reply": "You noticed how lonely he felt. Which moment in the story shows it best?"})
    if "Rewrite the search query" in system:
        return json.dumps({"rewrites": ["feelings of a shipwrecked hero", "loneliness on an island"]})
    return "{}"


def step_widths(*, experts: int, votes: int, expert_call: str, groups: int = GROUPS) -> list[int]:
    """Concurrent calls of each dependent step of one dialogue after its topic: the student, the
    drafter beside the query rewrite, then per group the votes, the expert step(s), the synthesis.
    The depth is 1 (the topic) + their number."""
    return [1, 2] + ([votes] + [experts] * EXPERT_STEPS[expert_call] + [1]) * groups


def greedy_rounds(dialogues: int, concurrency: int, widths: list[int]) -> int:
    """Rounds of ``latency`` a first-come-first-served limiter of ``concurrency`` slots needs when
    every call takes exactly one round and nothing else costs time: the topic phase, then each
    dialogue's steps of ``widths`` concurrent calls, each step waiting for the previous one. The
    floor a real run can reach (the lower bound above ignores that steps wider than the free slots
    have to wait)."""
    rounds = math.ceil(dialogues / concurrency)  # topics (their own harness phase)
    step, left = [0] * dialogues, list([widths[0]] * dialogues)
    queue = [d for d in range(dialogues) for _ in range(widths[0])]
    finished = 0
    while finished < dialogues:
        batch, queue = queue[:concurrency], queue[concurrency:]
        rounds += 1
        for d in batch:
            left[d] -= 1
            if left[d] == 0:
                step[d] += 1
                if step[d] == len(widths):
                    finished += 1
                else:
                    left[d] = widths[step[d]]
                    queue.extend([d] * widths[step[d]])
    return rounds


def configs(work: Path, args) -> tuple[Ram2cConfig, BuildKBConfig, RetrievalConfig]:
    params = ROOT / "params.yaml"
    build = load_section("build_kb", BuildKBConfig, params)
    sources = [s.model_copy(update={"path": str(ROOT / s.path)}) for s in build.sources if not s.optional]
    build = build.model_copy(update={"sources": sources, "store": build.store.model_copy(update={"path": "kb"})})
    retrieval = load_section("retrieval", RetrievalConfig, params)
    ram2c = load_section("ram2c", Ram2cConfig, params)
    sources = [
        s.model_copy(update={"path": str(ROOT / s.path), "fallback": str(ROOT / s.fallback) if s.fallback else None})
        for s in ram2c.sources
    ]
    ram2c = ram2c.model_copy(
        update={
            "sources": sources,
            "dialogues": args.dialogues,
            "turns": 1,
            "concurrency": args.concurrency,
            "progress": not args.quiet,
            "output_mode": "json",
            "expert_call": args.expert_call,
            "topics": ram2c.topics.model_copy(update={"oversample": 1.0, "max_similarity": 0.999}),
            "reflection": ram2c.reflection.model_copy(
                update={"candidates": args.candidates, "vote_call": args.vote_call}
            ),
        }
    )
    return ram2c, build, retrieval


async def main(args: argparse.Namespace) -> dict:
    server = LoopbackProcess(latency_s=args.latency, reply=reply).start()
    url = server.url
    work = Path(tempfile.mkdtemp(prefix="ram2c-bench-"))
    ram2c, build, retrieval = configs(work, args)
    embedder = HashingEmbedder()
    build_knowledge_base(build, retrieval.groups, root=work, embedder=embedder, progress=False)
    spec = loopback_spec(url, concurrency=args.concurrency)
    runtime = LLMRuntime(LLMConfig(default=spec, cache=None))
    retriever = open_retriever(build, retrieval, llm=runtime.for_role("query_rewriter"), embedder=embedder, root=work)
    import datasets  # noqa: F401  (start-up cost kept off the clock; the exports use it)

    start = time.perf_counter()
    metrics = await generate_ram2c_async(ram2c, build, retrieval, root=work, runtime=runtime, retriever=retriever)
    wall = time.perf_counter() - start
    await runtime.close()
    calls = server.stop()
    k, c = ram2c.experts(), args.candidates
    votes = k if args.vote_call == "per_expert" else k * c
    widths = step_widths(experts=k, votes=votes, expert_call=args.expert_call)
    depth = 1 + len(widths)
    bound = max(depth * args.latency, math.ceil(calls / args.concurrency) * args.latency)
    floor = greedy_rounds(metrics["dialogues"], args.concurrency, widths) * args.latency
    generation = metrics["wall_s"]  # the two harness phases (topics, dialogues), without the final exports
    result = {
        "dialogues": metrics["dialogues"],
        "pairs_kept": metrics["pairs_kept"],
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "llm_calls": calls,
        "llm_calls_per_dialogue": round(calls / max(1, metrics["dialogues"]), 2),
        "expert_call": args.expert_call,
        "depth": depth,
        "wall_s": round(wall, 2),
        "generation_wall_s": generation,
        "lower_bound_s": bound,
        "ratio": round(wall / bound, 3),
        "generation_ratio": round(generation / bound, 3),
        "schedule_floor_s": floor,
        "floor_ratio": round(floor / bound, 3),
    }
    print(json.dumps(result, indent=1))
    print(
        f"wall {wall:.2f} s (generation {generation:.2f} s, the rest is preflight, topic dedup and the datasets/"
        f"LLaMA-Factory exports), lower bound {bound:.1f} s, ratio {wall / bound:.3f} "
        f"(generation {generation / bound:.3f}; goal <= 1.15); a first-come-first-served limiter with no other "
        f"cost needs {floor:.0f} s ({floor / bound:.3f})"
    )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dialogues", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--candidates", type=int, default=3, help="documents voted on per group")
    parser.add_argument("--vote-call", choices=["per_expert", "per_document"], default="per_expert")
    parser.add_argument("--expert-call", choices=["joint", "separate"], default="joint")
    parser.add_argument("--quiet", action="store_true")
    asyncio.run(main(parser.parse_args()))
