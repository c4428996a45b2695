"""Local CPU generates that run at the same time share the intra-op threads (pipelines.llm.cpu_threads)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pipelines.llm.config import TransformersBackendConfig
from pipelines.llm.cpu_threads import GENERATES, SharedCpuThreads
from pipelines.llm.transformers_backend import TransformersBackend
from pipelines.llm.types import SamplingParams
from tests.tiny_models import tiny_qwen2

torch = pytest.importorskip("torch")


def test_a_generate_alone_gets_the_budget_and_each_one_started_beside_others_a_share():
    share = SharedCpuThreads()
    assert [share.share(2), share.share(4), share.share(1)] == [2, 4, 1]
    share.running = 1
    assert [share.share(2), share.share(4), share.share(1)] == [1, 2, 1]
    share.running = 3
    assert [share.share(2), share.share(8)] == [1, 2]


def test_the_count_is_set_on_the_calling_thread_and_restored_even_after_an_error():
    share = SharedCpuThreads()
    before = torch.get_num_threads()
    seen: dict[str, int] = {}
    inside, release = threading.Event(), threading.Event()

    def worker():
        with share.threads(1) as count:
            seen["worker"] = torch.get_num_threads()
            seen["count"] = count
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    assert inside.wait(10)
    seen["main while the worker runs"] = torch.get_num_threads()
    assert share.running == 1
    release.set()
    thread.join()
    assert seen == {"worker": 1, "count": 1, "main while the worker runs": before}
    with pytest.raises(RuntimeError), share.threads(1):
        raise RuntimeError("generate failed")
    assert share.running == 0 and torch.get_num_threads() == before


def test_two_models_generating_at_once_split_the_threads_and_one_alone_gets_them_all(tmp_path):
    folder = tiny_qwen2(tmp_path / "qwen2", init_std=0.3)
    backends = []
    for _ in range(2):
        backend = TransformersBackend(TransformersBackendConfig(kind="transformers", model=str(folder), threads=2))
        backend.load()
        backends.append(backend)
    assert [b.thread_budget for b in backends] == [2, 2]
    both_inside = threading.Barrier(2, timeout=30)
    seen: list[int] = []

    def recording(generate, *, wait: bool):
        def run(*args, **kwargs):
            seen.append(torch.get_num_threads())
            if wait:
                both_inside.wait()  # neither returns before the other started
            return generate(*args, **kwargs)

        return run

    originals = [b.model.generate for b in backends]
    params = SamplingParams(max_tokens=4)

    async def ask(backend, text):
        return await backend.chat([{"role": "user", "content": text}], params)

    async def together():
        return await asyncio.gather(ask(backends[0], "Hello there"), ask(backends[1], "Name a colour."))

    try:
        for backend, generate in zip(backends, originals, strict=True):
            backend.model.generate = recording(generate, wait=True)
        replies = asyncio.run(together())
        assert sorted(seen) == [1, 2]  # the first to start had both; the second got its share
        assert GENERATES.running == 0
        seen.clear()
        backends[0].model.generate = recording(originals[0], wait=False)
        alone = asyncio.run(ask(backends[0], "Hello there"))
        assert seen == [2]
    finally:
        for backend, generate in zip(backends, originals, strict=True):
            backend.model.generate = generate
    assert all(r.usage.completion_tokens >= 1 for r in replies) and alone.choices
