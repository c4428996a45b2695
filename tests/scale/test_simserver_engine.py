"""The simulated server's timing: the vLLM-like model's defaults reproduce the published figures
it was fitted to, and the engine's latencies, batching and queueing follow the model."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.simserver.engine import EngineModel, VirtualEngine

# LambdaLabsML/vllm-benchmark, results/prompt_{10,40,160}/1xA100-80GB-SXM/Mistral-7B-Instruct-v0.3_tp1_len2000.json
# (vLLM 0.6, 2024-09-07, ShareGPT prompts all sent at once): median time per output token (ms) with
# N sequences in the batch, and the prefill rate read from the last first-token time of N=40 and 160
PUBLISHED_TPOT_MS = {10: 11.35, 40: 14.07, 160: 24.71}
PUBLISHED_PREFILL = {40: 9349 / 0.7645, 160: 37741 / 3.0317}  # input tokens / last TTFT (s)


def test_defaults_reproduce_the_published_figures():
    model = EngineModel()
    for batch, tpot_ms in PUBLISHED_TPOT_MS.items():
        assert model.tpot(batch) * 1000 == pytest.approx(tpot_ms, rel=0.03), batch
    for rate in PUBLISHED_PREFILL.values():
        assert model.prefill_tokens_per_s == pytest.approx(rate, rel=0.03)
    assert model.max_num_seqs == 256  # vLLM's default max_num_seqs
    # the batch's throughput saturates: doubling the batch from 128 to 256 gains under 40 %
    assert 1.0 < model.throughput(256) / model.throughput(128) < 1.4
    assert model.service_s(1230, 100, batch=1) == pytest.approx(0.1 + 100 * model.tpot(1))


async def _serve_all(model: EngineModel, requests: list[tuple[int, int]]) -> tuple[list[float], float, VirtualEngine]:
    engine = VirtualEngine(model)
    engine.start()
    try:
        start = time.perf_counter()
        latencies = await asyncio.gather(*(engine.serve(p, 0, c) for p, c in requests))
        return list(latencies), time.perf_counter() - start, engine
    finally:
        await engine.stop()


def test_one_request_takes_its_prefill_and_decode_time_compressed():
    model = EngineModel(compression=4.0)
    [latency], wall, engine = asyncio.run(_serve_all(model, [(1230, 100)]))
    expected = 1230 / model.prefill_tokens_per_s + 100 * model.tpot(1)  # 1.15 virtual seconds
    assert latency == pytest.approx(expected, rel=0.15)
    assert wall == pytest.approx(expected / 4.0, rel=0.3)
    assert engine.stats.completion_tokens == 100 and engine.stats.prefill_s == pytest.approx(0.1, rel=0.01)


def test_a_batch_decodes_together_at_the_batch_speed():
    model = EngineModel(compression=4.0)
    latencies, _, engine = asyncio.run(_serve_all(model, [(123, 100)] * 64))
    prefill = 64 * 123 / model.prefill_tokens_per_s  # every prefill comes first (0.64 s), then 100 steps
    assert max(latencies) == pytest.approx(prefill + 100 * model.tpot(64), rel=0.15)
    assert engine.stats.peak_running == 64 and engine.stats.peak_waiting == 0
    assert engine.stats.busy_s == pytest.approx(max(latencies), rel=0.1)


def test_requests_beyond_max_num_seqs_wait_for_a_free_slot():
    model = EngineModel(compression=4.0, max_num_seqs=4)
    latencies, _, engine = asyncio.run(_serve_all(model, [(10, 60)] * 8))
    first, second = sorted(latencies)[:4], sorted(latencies)[4:]
    assert min(second) == pytest.approx(2 * max(first), rel=0.2)  # the second four start when the first end
    assert engine.stats.peak_running == 4 and engine.stats.peak_waiting == 4
    assert engine.stats.queue_wait_s == pytest.approx(4 * max(first), rel=0.2)


def test_bad_timings_are_refused():
    with pytest.raises(ValueError, match="positive"):
        EngineModel(compression=0)
    with pytest.raises(ValueError, match="max_num_seqs"):
        EngineModel(max_num_seqs=0)
