"""Optional cross-encoder reranking with FlagEmbedding's ``FlagReranker`` (bge-reranker-v2-m3 in
real runs). Scores are sigmoid-normalised relevance in [0, 1]; the model is loaded from a local
folder only.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.retrieval.config import RerankConfig


class CrossEncoderReranker:
    """``score(query, passages)`` -> one relevance score per passage."""

    def __init__(self, cfg: RerankConfig):
        from FlagEmbedding import FlagReranker

        folder = Path(cfg.model)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"reranker folder {folder} not found; set retrieval.rerank.model to a local cross-encoder "
                "folder or retrieval.rerank.enabled: false (models are never downloaded at run time)"
            )
        self.cfg = cfg
        self.identity = f"rerank:{folder.resolve().name}"
        self.model = FlagReranker(
            str(folder),
            use_fp16=cfg.use_fp16,
            devices=cfg.device,
            batch_size=cfg.batch_size,
            max_length=cfg.max_length,
            normalize=True,
        )

    def score(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        scores = self.model.compute_score(
            [[query, p] for p in passages], batch_size=self.cfg.batch_size, max_length=self.cfg.max_length
        )
        if isinstance(scores, float):
            scores = [scores]
        return [float(s) for s in scores]
