"""The knowledge base at 1,000,000 chunks: store throughput, query latency, memory and disk as the
collection grows, on a Chroma server (``chroma run``, the backend many shards share) or a local
folder, with vectors of the real embedder's size (384: all-MiniLM-L6-v2; 1024: BGE-M3).

The chunks (generated Chinese text of about 180 characters with the build's metadata fields) and
their vectors (seeded random unit vectors: the store is what is measured) are written through
:meth:`KnowledgeStore.upsert` in Chroma's largest batches. At every checkpoint (``--checkpoints``)
the script records the write rate since the last checkpoint, dense top-10 query latency (p50, p95
over ``--queries`` single queries, and of 3 queries in one call as a RAM2C group asks them), the
resident memory of the process holding the index (the server, or this process), and the store's
size on disk. It stops early, and says so, when memory or disk would run out (``--max-rss-gb``,
``--min-free-gb``): the last checkpoint is then the largest size that fits.

Embedding throughput is measured apart (``--embed-sample`` real chunks through the offline MiniLM
embedder on this CPU) and extrapolated to the collection's size.

    python benchmarks/kb_million.py                       # 1,000,000 chunks, server backend, dim 384
    python benchmarks/kb_million.py --chunks 200000 --backend persistent

Results: ``reports/benchmarks/kb_million.json`` and stdout (one JSON line per checkpoint).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.kb_scale import CHARS, percentile  # noqa: E402
from pipelines.io import write_json_atomic  # noqa: E402
from pipelines.retrieval.config import StoreConfig  # noqa: E402
from pipelines.retrieval.store import KnowledgeStore  # noqa: E402
from tests.support.chroma_server import ChromaServer  # noqa: E402

KIND = "class_records"


def chunk_batch(start: int, n: int, dim: int, rng: np.random.Generator) -> tuple[list, list, np.ndarray, list]:
    texts_rng = random.Random(start)
    ids = [f"bench/d{i}#0" for i in range(start, start + n)]
    texts = ["".join(texts_rng.choices(CHARS, k=180)) for _ in range(n)]
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    metas = [
        {"kind": KIND, "group": "teacher", "file": "bench.jsonl", "doc": f"bench/d{i}", "position": 0, "language": "zh"}
        for i in range(start, start + n)
    ]
    return ids, texts, vectors, metas


def disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def query_latency(store: KnowledgeStore, dim: int, queries: int) -> dict:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((queries, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.query(KIND, vectors[:1], 10)  # warm
    single, triple = [], []
    for i in range(queries):
        t = time.perf_counter()
        store.query(KIND, vectors[i : i + 1], 10)
        single.append(time.perf_counter() - t)
    for i in range(0, queries - 2, 3):
        t = time.perf_counter()
        store.query(KIND, vectors[i : i + 3], 10)
        triple.append(time.perf_counter() - t)
    return {
        "query_ms": {"p50": percentile(single, 50), "p95": percentile(single, 95)},
        "query_3_ms": {"p50": percentile(triple, 50), "p95": percentile(triple, 95)},
    }


def embedding_rate(sample: int) -> dict:
    """Chunks per second of the offline MiniLM embedder on this CPU (batch 64, as build_kb)."""
    from pipelines.retrieval.config import EmbedderConfig
    from pipelines.retrieval.embedders import SentenceTransformerEmbedder
    from tests.tiny_models import minilm_dir

    embedder = SentenceTransformerEmbedder(EmbedderConfig(path=str(minilm_dir()), batch_size=64))
    rng = random.Random(3)
    texts = ["".join(rng.choices(CHARS, k=180)) for _ in range(sample)]
    embedder.encode_documents(texts[:64])  # warm
    start = time.perf_counter()
    embedder.encode_documents(texts)
    seconds = time.perf_counter() - start
    return {"sample": sample, "seconds": round(seconds, 1), "chunks_per_s": round(sample / seconds, 1),
            "torch_threads": __import__("torch").get_num_threads()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--backend", choices=["server", "persistent"], default="server")
    parser.add_argument("--checkpoints", default="50000,100000,250000,500000,750000,1000000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--max-rss-gb", type=float, default=0.8 * psutil.virtual_memory().total / 2**30)
    parser.add_argument("--min-free-gb", type=float, default=5.0)
    parser.add_argument("--embed-sample", type=int, default=2000, help="0: skip the embedding measurement")
    parser.add_argument("--work", default=None, help="folder for the store (default: a temporary one, removed)")
    parser.add_argument("--out", default=str(ROOT / "reports/benchmarks/kb_million.json"))
    args = parser.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="kb_million_"))
    path = work / "kb"
    checkpoints = sorted({int(c) for c in args.checkpoints.split(",") if int(c) <= args.chunks} | {args.chunks})
    server = ChromaServer(path).start() if args.backend == "server" else None
    try:
        cfg = StoreConfig(path=str(path), backend=args.backend)
        if server is not None:
            cfg = cfg.model_copy(update={"server": server.config})
        store = KnowledgeStore.open(cfg)
        holder = psutil.Process(server.process.pid if server else os.getpid())
        identity = f"benchmark-random:{args.dim}"
        rng = np.random.default_rng(0)
        rows, written, since, stopped = [], 0, time.perf_counter(), None
        base_rss = holder.memory_info().rss / 2**20
        for target in checkpoints:
            while written < target:
                n = min(args.batch, target - written)
                store.upsert(KIND, identity, *chunk_batch(written, n, args.dim, rng))
                written += n
            seconds = time.perf_counter() - since
            rss = holder.memory_info().rss / 2**20
            free_gb = shutil.disk_usage(work).free / 2**30
            row = {
                "chunks": written,
                "write_chunks_per_s": round((written - (rows[-1]["chunks"] if rows else 0)) / seconds, 1),
                "rss_mb": round(rss, 1),
                "rss_kb_per_chunk": round((rss - base_rss) * 1024 / written, 2),
                "disk_mb": round(disk_mb(path), 1),
                "disk_free_gb": round(free_gb, 1),
                **query_latency(store, args.dim, args.queries),
                "load_average": round(os.getloadavg()[0], 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            growth = rss / written  # MB per chunk so far: the next checkpoint's estimate
            if rss + growth * (args.batch * 20) > args.max_rss_gb * 1024 or free_gb < args.min_free_gb:
                stopped = f"stopped at {written} chunks: memory or disk would run out (limits in the arguments)"
                break
            since = time.perf_counter()
        assert store.count(KIND) == written
        result = {
            "backend": args.backend,
            "dim": args.dim,
            "batch": args.batch,
            "requested_chunks": args.chunks,
            "stored_chunks": written,
            "stopped": stopped,
            "checkpoints": rows,
            "machine": {"cpus": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1)},
        }
        if args.embed_sample:
            rate = embedding_rate(args.embed_sample)
            rate["extrapolated_hours_for_stored"] = round(written / rate["chunks_per_s"] / 3600, 2)
            result["embedding"] = rate
        write_json_atomic(args.out, result)
        print(json.dumps(result, indent=1))
        return result
    finally:
        if server is not None:
            server.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
