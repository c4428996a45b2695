"""Text embedders for the knowledge bases.

- :class:`SentenceTransformerEmbedder`: a local sentence-transformers folder (the offline default,
  ``models/base/all-minilm-l6-v2``); dense, L2-normalised.
- :class:`BGEM3Embedder`: FlagEmbedding's ``BGEM3FlagModel`` for real runs; dense vectors and,
  with ``sparse: true``, lexical weights (token id -> weight) for hybrid scoring.

Both load from a local path only (``local_files_only``), so nothing is downloaded at run time.
``encode_documents`` / ``encode_queries`` return :class:`Encoded`; queries get ``query_prefix``.
``identity`` names the model folder, a fingerprint of its weights and configs (new weights in the
same folder change it), the dtype and the max length; a store built by another identity is
rebuilt, not mixed. ``device: auto`` is ``cuda`` where torch sees one; on the CPU an encode runs on
``threads`` intra-op threads (set for the encoding thread only, restored after). ``thread_safe``
says whether concurrent encodes may share the embedder (the torch tokenizer may not: the retriever
serialises them; the ONNX backend, :mod:`pipelines.retrieval.onnx_embedder`, may).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from pipelines.models.fingerprint import folder_fingerprint
from pipelines.retrieval.config import EmbedderConfig
from pipelines.retrieval.loading import collector_paused

log = logging.getLogger(__name__)


@dataclass
class Encoded:
    """``dense``: float32 array (n, dim), rows L2-normalised; ``sparse``: one {token: weight} per text."""

    dense: np.ndarray
    sparse: list[dict[str, float]] | None = None


class Embedder(Protocol):
    identity: str

    def encode_documents(self, texts: list[str]) -> Encoded: ...

    def encode_queries(self, texts: list[str]) -> Encoded: ...


def resolve_device(device: str) -> str:
    """``auto``: ``cuda`` where torch sees a GPU, else ``cpu``; any other name as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class TorchThreads:
    """Runs CPU encodes on ``threads`` intra-op threads: set on the encoding thread for the call and
    restored to the count torch had when this was made (``None``: left alone)."""

    def __init__(self, threads: int | None, device: str):
        import torch

        self.torch = torch
        self.threads = threads if device.startswith("cpu") else None
        self.default = torch.get_num_threads()

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self.threads is None or self.threads == self.default:
            yield
            return
        self.torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            self.torch.set_num_threads(self.default)


def _check_path(path: str) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"embedding model folder {folder} not found; run `dvc repro prepare_models` or set "
            "build_kb.embedder.path to a local model folder (models are never downloaded at run time)"
        )
    return folder


def _name(folder: Path) -> str:
    """A readable model name: the last two parts of the resolved folder path."""
    return "/".join(folder.resolve().parts[-2:])


def model_identity(kind: str, folder: Path, *, dtype: str, max_length: int, extra: str = "") -> str:
    """``<kind>:<name>:<weights fingerprint>:<dtype>:len<max_length>[:extra]``."""
    fingerprint = folder_fingerprint(folder.resolve())[:16]
    parts = [kind, _name(folder), fingerprint, dtype, f"len{max_length}"] + ([extra] if extra else [])
    return ":".join(parts)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (dense only)."""

    thread_safe = False  # one fast tokenizer: concurrent calls fail ("Already borrowed")

    def __init__(self, cfg: EmbedderConfig):
        folder = _check_path(cfg.path)
        self.cfg = cfg
        with collector_paused():
            from sentence_transformers import SentenceTransformer

            self.device = resolve_device(cfg.device)
            self.model = SentenceTransformer(str(folder), device=self.device, local_files_only=True)
        self.threads = TorchThreads(cfg.threads, self.device)
        self.model.max_seq_length = min(cfg.max_length, self.model.max_seq_length or cfg.max_length)
        dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        self.identity = model_identity(
            "sentence_transformers", folder, dtype=dtype, max_length=self.model.max_seq_length
        )

    def _encode(self, texts: list[str]) -> Encoded:
        if not texts:
            return Encoded(np.zeros((0, self.model.get_sentence_embedding_dimension()), dtype=np.float32))
        with self.threads():
            vectors = self.model.encode(
                texts, batch_size=self.cfg.batch_size, normalize_embeddings=True, show_progress_bar=False
            )
        return Encoded(_normalise(vectors))

    def encode_documents(self, texts: list[str]) -> Encoded:
        return self._encode(texts)

    def encode_queries(self, texts: list[str]) -> Encoded:
        return self._encode([self.cfg.query_prefix + t for t in texts])


class BGEM3Embedder:
    """FlagEmbedding BGE-M3: dense = normalised CLS vector; sparse = lexical weights (optional)."""

    thread_safe = False

    def __init__(self, cfg: EmbedderConfig):
        folder = _check_path(cfg.path)
        with collector_paused():
            from FlagEmbedding import BGEM3FlagModel

            cfg = cfg.model_copy(update={"device": resolve_device(cfg.device)})
            self.cfg = cfg
            self.threads = TorchThreads(cfg.threads, cfg.device)
            self.model = BGEM3FlagModel(
                str(folder),
                use_fp16=cfg.use_fp16,
                devices=cfg.device,
                batch_size=cfg.batch_size,
                query_max_length=cfg.max_length,
                passage_max_length=cfg.max_length,
                query_instruction_for_retrieval=cfg.query_prefix or None,
            )
        # FlagEmbedding halves the weights only off the CPU (it moves the model at the first encode)
        dtype = "float16" if cfg.use_fp16 and not cfg.device.startswith("cpu") else "float32"
        self.identity = model_identity(
            "bge_m3", folder, dtype=dtype, max_length=cfg.max_length, extra=f"sparse{int(cfg.sparse)}"
        )

    def _encode(self, texts: list[str], *, query: bool) -> Encoded:
        encode = self.model.encode_queries if query else self.model.encode_corpus
        with self.threads():
            out = encode(
                texts,
                batch_size=self.cfg.batch_size,
                max_length=self.cfg.max_length,
                return_dense=True,
                return_sparse=self.cfg.sparse,
                return_colbert_vecs=False,
            )
        sparse = None
        if self.cfg.sparse:
            sparse = [{str(k): float(v) for k, v in weights.items()} for weights in out["lexical_weights"]]
        return Encoded(_normalise(np.atleast_2d(out["dense_vecs"])), sparse)

    def encode_documents(self, texts: list[str]) -> Encoded:
        return self._encode(texts, query=False)

    def encode_queries(self, texts: list[str]) -> Encoded:
        return self._encode(texts, query=True)


def lexical_score(query: dict[str, float], doc: dict[str, float]) -> float:
    """BGE-M3 lexical matching score: sum over shared tokens of query weight * document weight."""
    return float(sum(w * doc[t] for t, w in query.items() if t in doc))
