"""CPU per query of the offline MiniLM embedder, and the KGC demonstration pools cold vs warm.

    python benchmarks/embedding_cpu.py [--queries 200] [--pool 2000]

Prints, per backend (torch, onnx) and intra-op thread count (1, torch's default), the process CPU
and wall ms per single-sentence query encode (what a RAM2C retrieval step does); then the time to
get the vectors of a ``--pool``-sentence demonstration pool with an empty cache (embedding) and a
warm one (read from disk).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from pipelines.kgc.demo_cache import DemoVectorCache
from pipelines.retrieval.config import EmbedderConfig
from pipelines.retrieval.embedder_choice import build_embedder
from pipelines.retrieval.onnx_embedder import OnnxSentenceEmbedder
from tests.tiny_models import minilm_dir

SENTENCES = [
    "How do I explain fractions to a student who is afraid of making mistakes?",
    "The student says she feels stupid whenever the teacher corrects her in front of the class.",
    "Which teaching strategy helps a pupil who rushes through word problems?",
    "A triangle whose three sides are equal is called equilateral.",
]


def per_query(embedder, n: int) -> tuple[float, float]:
    for text in SENTENCES:  # warm up
        embedder.encode_queries([text])
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(n):
        embedder.encode_queries([f"{SENTENCES[i % len(SENTENCES)]} ({i})"])
    return (time.process_time() - cpu) * 1000 / n, (time.perf_counter() - wall) * 1000 / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pool", type=int, default=2000)
    args = parser.parse_args()
    default = torch.get_num_threads()
    print(f"torch default intra-op threads: {default}")
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("torch", "onnx"):
            for threads in (1, None):
                cfg = EmbedderConfig(path=str(minilm_dir()), device="cpu", threads=threads, backend=backend)
                embedder = OnnxSentenceEmbedder(cfg, cache=Path(tmp)) if backend == "onnx" else build_embedder(cfg)
                cpu, wall = per_query(embedder, args.queries)
                print(f"{backend:5} threads={threads or default}: {cpu:.2f} ms CPU, {wall:.2f} ms wall per query")
        embedder = build_embedder(EmbedderConfig(path=str(minilm_dir()), device="cpu"))
        pool = [f"{SENTENCES[i % len(SENTENCES)]} Sentence {i} of the pool." for i in range(args.pool)]
        for state in ("cold", "warm"):
            start = time.perf_counter()
            DemoVectorCache(Path(tmp) / "demos", identity=embedder.identity).vectors(
                pool, lambda texts: embedder.encode_documents(texts).dense
            )
            print(f"demonstration pool of {args.pool} sentences, {state} cache: {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
