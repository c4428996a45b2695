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


MIXED = [*TEXTS, "  spaced  out  ", "Ünïcödé àccents ÉCOLE", "中文的句子，学生很焦虑。", "word " * 400]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(an ONNX embedder loaded in full, which exported the model, and the folder it exported to)."""
    from pipelines.retrieval.onnx_embedder import OnnxSentenceEmbedder

    cache = tmp_path_factory.mktemp("onnx")
    return OnnxSentenceEmbedder(
        EmbedderConfig(path=str(minilm_dir()), batch_size=3, backend="onnx"), cache=cache
    ), cache


def test_an_exported_model_loads_from_the_folder_files_with_the_same_vectors(exported):
    """The second load reads tokenizer.json and the pooling config (no torch, no sentence-transformers)
    and gives bitwise the vectors of the full load: padded documents, long texts cut at max_length."""
    from pipelines.retrieval.onnx_embedder import OnnxSentenceEmbedder
    from pipelines.retrieval.st_folder import FolderTokenizer

    full, cache = exported
    light = OnnxSentenceEmbedder(full.cfg, cache=cache)
    assert not isinstance(full.tokenizer, FolderTokenizer) and isinstance(light.tokenizer, FolderTokenizer)
    assert (light.identity, light.max_length, light.pooling) == (
        full.identity,
        full.max_length,
        "mean",
    ) and light.max_length == 256
    docs = light.encode_documents(MIXED).dense
    assert np.array_equal(docs, full.encode_documents(MIXED).dense) and docs.shape == (8, 384)
    assert np.array_equal(light.encode_queries(MIXED).dense, full.encode_queries(MIXED).dense)
    ids = light.tokenizer(["word " * 400])["input_ids"]
    assert ids.shape == (1, 256) and ids[0, 0] == 101 and ids[0, -1] == 102  # [CLS] ... [SEP], cut to 256


def test_the_light_load_imports_no_torch(exported):
    import subprocess
    import sys

    tmp_path = exported[1]
    code = (
        "import sys; from pathlib import Path; from pipelines.retrieval.config import EmbedderConfig; "
        "from pipelines.retrieval.onnx_embedder import OnnxSentenceEmbedder; "
        f"cfg = EmbedderConfig(path={str(minilm_dir())!r}, backend='onnx'); "
        f"e = OnnxSentenceEmbedder(cfg, cache=Path({str(tmp_path)!r})); "
        "v = e.encode_queries(['a question']).dense; "
        "print(v.shape, sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "(1, 384) []"


def test_a_folder_the_light_load_cannot_reproduce_loads_the_full_model(tmp_path):
    import json
    import shutil

    from pipelines.retrieval.st_folder import read_folder

    folder = shutil.copytree(minilm_dir(), tmp_path / "model")
    assert read_folder(folder, 512).max_length == 256 and read_folder(folder, 64).max_length == 64
    config = folder / "sentence_bert_config.json"
    config.write_text(json.dumps({"max_seq_length": 256, "do_lower_case": True}))
    assert read_folder(folder, 256) is None  # sentence-transformers would lower-case the texts itself
    config.write_text(json.dumps({"max_seq_length": 256, "do_lower_case": False}))
    tokenizer_config = folder / "tokenizer_config.json"
    settings = json.loads(tokenizer_config.read_text())
    tokenizer_config.write_text(json.dumps({**settings, "do_lower_case": False}))
    assert read_folder(folder, 256) is None  # transformers would rebuild the normaliser
    tokenizer_config.write_text(json.dumps(settings))
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()), "pooling_mode_max_tokens": True}))
    assert read_folder(folder, 256) is None


def test_query_vectors_are_encoded_alone_and_kept_per_text(exported):
    from pipelines.retrieval.onnx_embedder import OnnxSentenceEmbedder, QueryVectors

    onnx = OnnxSentenceEmbedder(EmbedderConfig(path=str(minilm_dir()), backend="onnx"), cache=exported[1])
    first = onnx.encode_queries(TEXTS).dense
    assert onnx.queries.hits == 0
    alone = np.concatenate([onnx.encode_documents([t]).dense for t in TEXTS])
    assert np.array_equal(first, alone)  # each text on its own: no padding
    again = onnx.encode_queries([TEXTS[1], TEXTS[0], TEXTS[1]]).dense
    assert onnx.queries.hits == 3 and np.array_equal(again, first[[1, 0, 1]])
    assert np.abs(first - onnx.encode_documents(TEXTS).dense).max() < 1e-6  # a padded batch: the same within 1e-6
    assert onnx.encode_queries([]).dense.shape == (0, 384)
    small = QueryVectors(size=2)
    for i, text in enumerate("abc"):
        small.put(text, np.full(3, i, dtype=np.float32))
    assert small.get("a") is None and small.get("c")[0] == 2 and small.hits == 1
    with pytest.raises(ValueError):
        small.get("b")[0] = 5.0  # stored vectors are read-only


def test_the_exported_identity_is_the_loaded_embedders_without_loading_it(tmp_path, monkeypatch):
    from pipelines.kgc.run import document_encoder
    from pipelines.retrieval import onnx_embedder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cfg = EmbedderConfig(path=str(minilm_dir()), backend="onnx", max_length=64)
    assert onnx_embedder.exported_identity(cfg) is None  # not exported yet: only a load can tell
    identity, encode = document_encoder(cfg)  # loads (and exports)
    assert onnx_embedder.exported_identity(cfg) == identity == build_embedder(cfg).identity
    assert identity.endswith(":float32:len64")
    loads = []
    monkeypatch.setattr("pipelines.kgc.run.build_embedder", lambda c: loads.append(c) or build_embedder(c))
    again, deferred = document_encoder(cfg)
    assert again == identity and loads == []  # nothing loaded until the first encode
    np.testing.assert_array_equal(deferred(TEXTS), encode(TEXTS))
    assert len(loads) == 1 and deferred(TEXTS[:1]).shape == encode(TEXTS[:1]).shape
    assert len(loads) == 1
    longer = EmbedderConfig(path=str(minilm_dir()), backend="onnx", max_length=100000)
    assert onnx_embedder.exported_identity(longer) == build_embedder(longer).identity  # the folder's own limit
