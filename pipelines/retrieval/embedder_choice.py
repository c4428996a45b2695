"""The embedder a config names (:func:`build_embedder`): apart from :mod:`pipelines.retrieval.embedders`
so that the ONNX backend, which builds on that module, is imported at the top without a circle."""

from __future__ import annotations

import logging

from pipelines.retrieval.config import EmbedderConfig
from pipelines.retrieval.embedders import BGEM3Embedder, Embedder, SentenceTransformerEmbedder
from pipelines.retrieval.onnx_embedder import OnnxSentenceEmbedder

log = logging.getLogger(__name__)


def build_embedder(cfg: EmbedderConfig) -> Embedder:
    """The embedder named by ``cfg.kind`` and ``cfg.backend`` (heavy libraries are imported only when
    the embedder loads its model)."""
    log.info("loading %s embedder from %s", cfg.kind, cfg.path)
    if cfg.kind == "bge_m3":
        return BGEM3Embedder(cfg)
    if cfg.backend == "onnx":
        return OnnxSentenceEmbedder(cfg)
    return SentenceTransformerEmbedder(cfg)
