"""Embedding a generation stage can afford: one intra-op thread, device auto, the ONNX backend."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from pipelines.retrieval.config import EmbedderConfig
from pipelines.retrieval.embedder_choice import build_embedder
from pipelines.retrieval.embedders import TorchThreads, resolve_device
from pipelines.retrieval.retriever import Retriever
from tests.retrieval.conftest import blocked_network
from tests.tiny_models import minilm_dir

TEXTS = [
    "What is a fraction?",
    "The psychologist listens to the anxious student who failed the test twice and feels ashamed.",
    "x",
    "A triangle whose three sides are equal is called equilateral; each of its angles is sixty degrees.",
]


def test_a_cpu_encode_runs_on_one_thread_and_restores_the_count(minilm):
    seen, encode = [], minilm.model.encode
    before = torch.get_num_threads()
    minilm.model.encode = lambda *a, **k: seen.append(torch.get_num_threads()) or encode(*a, **k)
    try:
        minilm.encode_queries(TEXTS[:1])
    finally:
        del minilm.model.encode
    assert EmbedderConfig().threads == 1 and seen == [1] and torch.get_num_threads() == before
    with TorchThreads(None, "cpu")():
        assert torch.get_num_threads() == before
    with TorchThreads(1, "cuda")():  # threads are a CPU setting
        assert torch.get_num_threads() == before


def test_device_auto_is_cuda_where_torch_sees_one(monkeypatch):
    assert EmbedderConfig().device == "auto" and resolve_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda:1") == "cuda:1"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"


def test_onnx_is_for_sentence_transformers_only():
    with pytest.raises(ValueError, match="backend: onnx runs sentence_transformers models only"):
        EmbedderConfig(kind="bge_m3", backend="onnx")


def test_the_onnx_backend_gives_the_torch_vectors_and_exports_once(minilm, tmp_path, monkeypatch):
    from pipelines.retrieval import onnx_embedder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    exports, export = [], onnx_embedder.export
    monkeypatch.setattr(onnx_embedder, "export", lambda *a: exports.append(a[1]) or export(*a))
    cfg = EmbedderConfig(path=str(minilm_dir()), batch_size=3, backend="onnx")
    with blocked_network() as attempts:
        onnx = build_embedder(cfg)
    assert attempts == [] and isinstance(onnx, onnx_embedder.OnnxSentenceEmbedder)
    assert onnx.identity == minilm.identity and onnx.thread_safe and not minilm.thread_safe
    assert exports == [tmp_path / "edumas" / "onnx" / onnx.path.name] and onnx.path.is_file()
    for encode in ("encode_documents", "encode_queries"):
        got, want = getattr(onnx, encode)(TEXTS).dense, getattr(minilm, encode)(TEXTS).dense
        assert got.shape == want.shape == (4, 384) and got.dtype == np.float32
        assert np.abs(got - want).max() < 1e-5
    assert onnx.encode_documents([]).dense.shape == (0, 384)
    again = build_embedder(cfg)
    assert len(exports) == 1 and np.array_equal(again.encode_queries(TEXTS).dense, onnx.encode_queries(TEXTS).dense)

    results: dict[int, np.ndarray] = {}  # concurrent encodes: no lock, each thread its own tokenizer

    def encode(i: int) -> None:
        for _ in range(5):
            results[i] = onnx.encode_queries(TEXTS[i % 4 :] or TEXTS).dense

    threads = [threading.Thread(target=encode, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, vectors in results.items():
        assert np.abs(vectors - minilm.encode_queries(TEXTS[i % 4 :] or TEXTS).dense).max() < 1e-5
    retriever = Retriever(store=None, embedder=onnx, cfg=None)
    assert not hasattr(retriever._encode_lock, "acquire")  # no process-wide lock for a thread-safe backend
    assert hasattr(Retriever(store=None, embedder=minilm, cfg=None)._encode_lock, "acquire")

