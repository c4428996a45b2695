"""Knowledge-base scale benchmark: build a ~100,000-chunk collection and time queries.

The RAM2C knowledge base holds about 22 million Chinese characters (about 150,000 chunks of 200
characters). This script writes generated Chinese documents (one ~180-character chunk each) as a
JSONL source, builds them with the project's own build path (loading, chunking, ids, diff, Chroma
upserts) using a fast deterministic embedder (seeded random unit vectors per text, so the store
and not the model is measured), then reports:

- build throughput (chunks/s), store size on disk;
- a no-op incremental rebuild (every chunk unchanged) and its time;
- dense query latency p50/p95 (one query, top-10) and multi-query latency (3 queries, fused);
- peak memory of the build: Python heap (tracemalloc: our loading, ids, batches, Chroma's Python
  side) and the process's peak RSS growth (also Chroma's native HNSW index), total and per 100k chunks.

``--sizes 10000,20000,40000`` runs one fresh build per size, each in its own process (so peak RSS
is that build's), without the query timings, and reports how memory per chunk changes with size.

Run: ``python benchmarks/kb_scale.py [--chunks 100000] [--dim 384] [--queries 200]`` or
``python benchmarks/kb_scale.py --sizes 10000,20000,40000``; results go to
``reports/benchmarks/kb_scale.json`` (``kb_memory.json`` for ``--sizes``) and stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from pipelines.io import write_json_atomic
from pipelines.retrieval.build import build_knowledge_base
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.retrieval.embedders import Encoded
from pipelines.retrieval.retriever import Retriever
from pipelines.retrieval.rewrite import RewriteOutcome
from pipelines.retrieval.store import KnowledgeStore

CHARS = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种"
    "面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本"
    "去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比"
    "或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总"
    "次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做"
    "必战先回则任取据处理"
)


class RandomEmbedder:
    """Seeded random unit vectors per text: deterministic, ~free, so the store is what is timed."""

    def __init__(self, dim: int):
        self.dim = dim
        self.identity = f"benchmark-random:{dim}"

    def _vectors(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def encode_documents(self, texts: list[str]) -> Encoded:
        return Encoded(self._vectors(texts))

    def encode_queries(self, texts: list[str]) -> Encoded:
        return Encoded(self._vectors(texts))


def write_corpus(path: Path, chunks: int, seed: int = 0) -> None:
    """``chunks`` documents of 150-180 generated Chinese characters in sentences (one chunk each)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(chunks):
            sentences, length, target = [], 0, rng.randint(150, 180)
            while length < target:
                sentence = "".join(rng.choices(CHARS, k=rng.randint(12, 30))) + rng.choice("。！？；")
                sentences.append(sentence)
                length += len(sentence)
            text = "".join(sentences)[:180]
            handle.write(json.dumps({"id": f"d{i}", "text": text}, ensure_ascii=False) + "\n")


def percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(values) * 1000, q)), 2)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _memory_scaling(args: argparse.Namespace) -> dict:
    """One child process per size (``--memory-only``), then the per-100k-chunk figures side by side."""
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        cmd = [sys.executable, __file__, "--chunks", str(size), "--dim", str(args.dim), "--memory-only"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    result = {"dim": args.dim, "builds": rows}
    write_json_atomic(Path(args.out).with_name("kb_memory.json"), result)
    return result


def _config() -> BuildKBConfig:
    return BuildKBConfig.model_validate(
        {
            "sources": [{"name": "generated", "kind": "class_records", "path": "corpus.jsonl", "id_field": "id"}],
            "chunking": {"size": 200, "overlap": 40, "min_length": 20},
            "store": {"path": "kb"},
            "quality": {"enabled": False},
        }
    )


def _measured_build(work: Path, dim: int) -> dict:
    """A fresh build of ``work/corpus.jsonl`` with peak Python heap and peak RSS growth."""
    rss_before = _rss_mb()
    tracemalloc.start()
    start = time.perf_counter()
    metrics = build_knowledge_base(
        _config(), RetrievalConfig().groups, root=work, embedder=RandomEmbedder(dim), progress=False
    )
    seconds = time.perf_counter() - start
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = _rss_mb() - rss_before
    n = metrics["chunks"]
    return {
        "chunks": n,
        "build_s": round(seconds, 1),
        "build_chunks_per_s": round(n / seconds, 1),
        "peak_python_heap_mb": round(heap_peak / 2**20, 1),
        "peak_rss_growth_mb": round(rss_growth, 1),
        "python_heap_mb_per_100k": round(heap_peak / 2**20 * 100_000 / n, 1),
        "rss_growth_mb_per_100k": round(rss_growth * 100_000 / n, 1),
        "python_heap_bytes_per_chunk": round(heap_peak / n),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384, help="vector size (MiniLM 384, BGE-M3 1024)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sizes", help="comma-separated chunk counts: memory scaling, one build per size")
    parser.add_argument("--memory-only", action="store_true", help="one measured build, no query timings")
    parser.add_argument("--out", default="reports/benchmarks/kb_scale.json")
    args = parser.parse_args(argv)
    if args.sizes:
        return _memory_scaling(args)
    work = Path(tempfile.mkdtemp(prefix="kb_scale_"))
    try:
        write_corpus(work / "corpus.jsonl", args.chunks)
        if args.memory_only:
            row = _measured_build(work, args.dim)
            print(json.dumps(row))
            return row
        cfg = _config()
        groups = RetrievalConfig().groups
        embedder = RandomEmbedder(args.dim)
        memory = _measured_build(work, args.dim)
        first, build_s = {"chunks": memory["chunks"]}, memory["build_s"]
        print(json.dumps({"chunks": first["chunks"], "build_s": round(build_s, 1)}), flush=True)
        start = time.perf_counter()
        again = build_knowledge_base(cfg, groups, root=work, embedder=embedder, progress=False)
        noop_s = time.perf_counter() - start
        size_mb = sum(p.stat().st_size for p in (work / "kb").rglob("*") if p.is_file()) / 2**20
        retriever = Retriever(KnowledgeStore(work / "kb"), embedder, RetrievalConfig(per_query_k=10, top_k=10))
        rng = random.Random(1)
        queries = ["".join(rng.choices(CHARS, k=20)) for _ in range(args.queries)]
        retriever.dense(queries[0], kinds=["class_records"])  # warm the index
        dense, multi = [], []
        for q in queries:
            t = time.perf_counter()
            retriever.dense(q, kinds=["class_records"], top_k=10)
            dense.append(time.perf_counter() - t)
        retriever.rewriter = _FixedRewriter()
        for q in queries:
            t = time.perf_counter()
            asyncio.run(retriever.retrieve(q, kinds=["class_records"], top_k=10))
            multi.append(time.perf_counter() - t)
        result = {
            "chunks": first["chunks"],
            "dim": args.dim,
            "build_s": round(build_s, 1),
            "build_chunks_per_s": memory["build_chunks_per_s"],
            "peak_python_heap_mb": memory["peak_python_heap_mb"],
            "peak_rss_growth_mb": memory["peak_rss_growth_mb"],
            "noop_rebuild_s": round(noop_s, 1),
            "noop_rebuild_embedded": again["embedded"],
            "store_mb": round(size_mb, 1),
            "dense_query_ms": {"p50": percentile(dense, 50), "p95": percentile(dense, 95)},
            "multi_query_3_ms": {"p50": percentile(multi, 50), "p95": percentile(multi, 95)},
            "queries": args.queries,
        }
        write_json_atomic(args.out, result)
        print(json.dumps(result, indent=2))
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _FixedRewriter:
    """Two fixed rewrites per query (no LLM): measures retrieval and fusion of three queries only."""

    failures = 0

    async def run(self, query: str, *, sample_index: int = 0) -> RewriteOutcome:
        return RewriteOutcome([query[::-1], query[5:] + query[:5]])


if __name__ == "__main__":
    main()
