"""The demo knowledge bases of params.yaml (``data/kb_sources``, no ``../shared`` sources) built
with the offline MiniLM into a test folder, for tests that retrieve real documents."""

from __future__ import annotations

from pathlib import Path

from pipelines.config import load_section
from pipelines.retrieval.build import build_knowledge_base
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from tests.tiny_models import minilm_dir

PROJECT = Path(__file__).resolve().parents[1]


def build_demo_kb(root: Path, *, n_rewrites: int) -> tuple[BuildKBConfig, RetrievalConfig]:
    """Build params.yaml's non-optional sources into ``root/kb``; ``(build_kb, retrieval)``
    sections as the stages would read them, the retrieval one with ``n_rewrites`` query rewrites."""
    params = PROJECT / "params.yaml"
    build = load_section("build_kb", BuildKBConfig, params)
    sources = [s.model_copy(update={"path": str(PROJECT / s.path)}) for s in build.sources if not s.optional]
    build = build.model_copy(
        update={
            "sources": sources,
            "embedder": build.embedder.model_copy(update={"path": str(minilm_dir())}),
            "store": build.store.model_copy(update={"path": "kb"}),
        }
    )
    retrieval = load_section("retrieval", RetrievalConfig, params).model_copy(update={"n_rewrites": n_rewrites})
    build_knowledge_base(build, retrieval.groups, root=root, progress=False)
    return build, retrieval
