"""Benchmark: cost of JSON-schema constrained decoding (xgrammar token masks) in the transformers backend.

Measures, on a local chat model (default: the converted SmolLM2-135M-Instruct):

1. grammar compile time: cold (first schema on the backend: xgrammar tokenizer info + compile)
   and cached (the same schema again);
2. generated tokens per second at batch 1 and batch B (default 16), without and with a schema,
   greedy, every row ``T`` new tokens. The schema asks for a list of at least 12 steps, so a
   constrained row never completes before ``T`` tokens and both runs generate exactly the same
   number of tokens: the ratio is the per-token cost of the mask. Goal: constrained >= 0.9 x
   unconstrained at both batch sizes. Each figure is the best of ``R`` alternating runs (default 3),
   so a neighbour's burst on a shared CPU does not decide the ratio.

    python benchmarks/structured_output.py                       # B=16, T=32, 1 torch thread
    python benchmarks/structured_output.py --model path/to/model -B 8 -T 16 --threads 2

Prints one line per measurement and the ratios; exits 1 if a ratio misses the goal.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipelines.llm.config import TransformersBackendConfig  # noqa: E402
from pipelines.llm.transformers_backend import TransformersBackend  # noqa: E402
from pipelines.llm.types import SamplingParams  # noqa: E402

STEPS = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "enum": ["water", "plants", "planets", "numbers"]},
        "steps": {"type": "array", "items": {"type": "string"}, "minItems": 12},
    },
    "required": ["topic", "steps"],
}
PROMPTS = [
    "Explain step by step how water boils.",
    "Explain step by step how plants grow.",
    "Explain step by step how planets form.",
    "Explain step by step how to add two numbers.",
]


async def timed_batch(backend: TransformersBackend, batch: int, params: SamplingParams) -> tuple[float, int]:
    """Send ``batch`` requests at once; returns (wall seconds, generated tokens)."""
    messages = [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)] + f" ({i})"}] for i in range(batch)]
    started = time.perf_counter()
    results = await asyncio.gather(*(backend.chat(m, params) for m in messages))
    return time.perf_counter() - started, sum(r.usage.completion_tokens for r in results)


async def benchmark(args: argparse.Namespace) -> dict[str, float]:
    spec = TransformersBackendConfig(
        kind="transformers", model=args.model, max_batch_size=args.batch, batch_wait_ms=200, threads=args.threads
    )
    backend = TransformersBackend(spec)
    backend.load()
    figures: dict[str, float] = {}
    started = time.perf_counter()
    backend.compile_schema(STEPS)
    figures["compile_cold_s"] = time.perf_counter() - started
    figures["tokenizer_info_s"] = backend.grammars.setup_seconds
    started = time.perf_counter()
    backend.compile_schema(STEPS)
    figures["compile_cached_s"] = time.perf_counter() - started
    print(
        f"grammar compile: cold {figures['compile_cold_s']:.3f} s "
        f"(tokenizer info {figures['tokenizer_info_s']:.3f} s, schema {backend.grammars.last_compile_seconds:.4f} s), "
        f"cached {figures['compile_cached_s'] * 1e6:.0f} us"
    )
    plain = SamplingParams(max_tokens=args.tokens)
    constrained = SamplingParams(max_tokens=args.tokens, json_schema=STEPS)
    await timed_batch(backend, 1, SamplingParams(max_tokens=2))  # warm-up outside the timings
    for batch in (1, args.batch):
        best: dict[str, tuple[float, int]] = {}
        for _ in range(args.repeats):
            for name, params in (("plain", plain), ("schema", constrained)):
                wall, tokens = await timed_batch(backend, batch, params)
                if name not in best or tokens / wall > best[name][1] / best[name][0]:
                    best[name] = (wall, tokens)
        for name, (wall, tokens) in best.items():
            figures[f"{name}_b{batch}_tok_s"] = tokens / wall
            print(f"batch {batch:>2} {name:<6}: {tokens} tokens in {wall:.2f} s = {tokens / wall:.1f} tokens/s")
        figures[f"ratio_b{batch}"] = figures[f"schema_b{batch}_tok_s"] / figures[f"plain_b{batch}_tok_s"]
    figures["grammar_rejected"] = backend.grammar_rejected
    await backend.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="models/base/smollm2-135m-instruct", help="local chat model folder")
    parser.add_argument("-B", "--batch", type=int, default=16, help="the larger batch size")
    parser.add_argument("-T", "--tokens", type=int, default=32, help="new tokens per row")
    parser.add_argument("-R", "--repeats", type=int, default=3, help="alternating runs per figure (best kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a busy CPU)")
    parser.add_argument("--goal", type=float, default=0.9, help="minimum constrained / unconstrained tokens/s")
    args = parser.parse_args(argv)
    if not Path(args.model).is_dir():
        print(f"error: model folder {args.model} not found; run `dvc repro prepare_models` or pass --model")
        return 1
    figures = asyncio.run(benchmark(args))
    ratios = {key: value for key, value in figures.items() if key.startswith("ratio_")}
    print("constrained / unconstrained tokens/s: " + ", ".join(f"{k[6:]} {v:.2f}" for k, v in ratios.items()))
    missed = [key for key, value in ratios.items() if value < args.goal]
    if missed or figures["grammar_rejected"]:
        print(f"goal missed: {missed or 'matchers refused tokens'} (goal >= {args.goal})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
