"""The demo knowledge bases of params.yaml (``data/kb_sources``, no ``../shared`` sources) built
with the offline MiniLM into a test folder, for tests that retrieve real documents.

The store is built once per content and copied: into the test cache (``tests.tiny_models.cache_root``)
under a key hashing the build section, every source file, the embedder's files and the code under
``pipelines/`` (any change there builds again), with a file lock, so the tests of every pytest-xdist
worker share one build (11-26 CPU-seconds each, measured on a loaded machine)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from filelock import FileLock

from pipelines.config import load_section
from pipelines.retrieval.build import build_knowledge_base
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from tests.tiny_models import cache_root, minilm_dir

PROJECT = Path(__file__).resolve().parents[1]
STORE = "kb"


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else [folder]


def build_key(build: BuildKBConfig, retrieval: RetrievalConfig) -> str:
    """Hash of what the built store depends on: the build section, the kind groups, the source files,
    the embedder's files and the project's code."""
    digest = hashlib.sha256(json.dumps([build.model_dump(mode="json"), retrieval.groups], sort_keys=True).encode())
    inputs = [*(Path(s.path) for s in build.sources), Path(build.embedder.path), PROJECT / "pipelines"]
    for folder in inputs:
        for path in _files(folder):
            if path.suffix != ".pyc":
                digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


def cached_store(build: BuildKBConfig, retrieval: RetrievalConfig) -> Path:
    """The folder holding the built store ``STORE`` for this content: built on first use, under a lock."""
    folder = cache_root() / "demo-kb" / build_key(build, retrieval)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if not (folder / "complete").exists():
            shutil.rmtree(folder, ignore_errors=True)
            build_knowledge_base(build, retrieval.groups, root=folder, progress=False)
            (folder / "complete").write_text("built\n", encoding="utf-8")
    return folder


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
            "store": build.store.model_copy(update={"path": STORE}),
        }
    )
    retrieval = load_section("retrieval", RetrievalConfig, params).model_copy(update={"n_rewrites": n_rewrites})
    shutil.copytree(cached_store(build, retrieval) / STORE, Path(root) / STORE)
    return build, retrieval
