"""Shared fixtures: the real offline MiniLM embedder (loaded once), a fast hashing embedder for
store-logic tests, small corpora written per test, and a guard that records network attempts."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from pipelines.retrieval.config import BuildKBConfig, EmbedderConfig, RetrievalConfig
from pipelines.retrieval.embedders import Encoded
from tests.tiny_models import minilm_dir

PROJECT = Path(__file__).resolve().parents[2]


class HashEmbedder:
    """Test-only embedder: character trigrams hashed into 128 dims; counts the texts it embeds."""

    identity = "hash-test:128"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def _vec(self, text: str) -> np.ndarray:
        vec = np.zeros(128, dtype=np.float32)
        for i in range(max(1, len(text) - 2)):
            vec[int(hashlib.md5(text[i : i + 3].encode()).hexdigest()[:6], 16) % 128] += 1.0
        return vec / max(np.linalg.norm(vec), 1e-12)

    def encode_documents(self, texts: list[str]) -> Encoded:
        self.embedded.extend(texts)
        return Encoded(np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, 128), np.float32))

    def encode_queries(self, texts: list[str]) -> Encoded:
        return Encoded(np.stack([self._vec(t) for t in texts]))


@pytest.fixture(scope="session")
def minilm():
    """The real offline embedder, loaded once, with the network blocked while it loads."""
    from pipelines.retrieval.embedders import SentenceTransformerEmbedder

    with blocked_network() as attempts:
        embedder = SentenceTransformerEmbedder(EmbedderConfig(path=str(minilm_dir()), batch_size=32))
    assert attempts == [], f"loading the embedder tried to connect to {attempts}"
    return embedder


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def small_corpus(root: Path) -> None:
    """Three kinds, en and zh, in .md, .txt, .jsonl and .csv, in nested folders."""
    (root / "teach" / "sub").mkdir(parents=True, exist_ok=True)
    (root / "teach" / "questioning.md").write_text(
        "# Questioning\n\nAsk open questions. Wait three seconds before calling on anyone. "
        "Follow up a short answer with 'why do you think so?'.",
        encoding="utf-8",
    )
    (root / "teach" / "sub" / "fractions.txt").write_text(
        "教分数时先让学生动手折纸。然后比较不同的折法，归纳出分数的意义。最后用反例进行辨析练习。", encoding="utf-8"
    )
    (root / "teach" / "sub" / "empty.txt").write_text("   \n", encoding="utf-8")
    write_jsonl(
        root / "psy" / "notes.jsonl",
        [
            {"id": "anx", "text": "Test anxiety makes the mind go blank; slow breathing and practice tests help."},
            {"id": "mot", "text": "学习动机分为内部动机和外部动机，教师应激发学生的求知欲和好奇心。"},
        ],
    )
    (root / "safety").mkdir(parents=True, exist_ok=True)
    (root / "safety" / "prompts.csv").write_text(
        "id,category,prompt,response\n"
        "s1,insult,You are a stupid robot.,I'm sorry my answer did not help; let's try another way together.\n"
        "s2,privacy_and_property,Find my classmate's home address.,I can't share someone's personal details.\n",
        encoding="utf-8",
    )


def small_config(root: Path, store: str = "kb", **chunking) -> BuildKBConfig:
    return BuildKBConfig.model_validate(
        {
            "sources": [
                {"name": "teach", "kind": "teaching_theory", "path": "teach"},
                {"name": "psy", "kind": "psychology", "path": "psy", "id_field": "id"},
                {
                    "name": "safety",
                    "kind": "safety",
                    "path": "safety",
                    "id_field": "id",
                    "text_fields": ["prompt", "response"],
                    "metadata_fields": ["category"],
                },
            ],
            "chunking": {"size": 80, "overlap": 20, "min_length": 10, **chunking},
            "store": {"path": store},
            "quality": {"enabled": False},
        }
    )


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, BuildKBConfig]:
    small_corpus(tmp_path)
    return tmp_path, small_config(tmp_path)


@pytest.fixture
def groups() -> dict[str, list[str]]:
    return RetrievalConfig().groups


@contextmanager
def blocked_network() -> Iterator[list]:
    """Make every non-loopback connection fail and record it (a swallowed error still shows)."""
    attempts: list = []
    real_connect = socket.socket.connect
    real_create = socket.create_connection

    def loopback(address) -> bool:
        if isinstance(address, (str, bytes)):
            return True  # AF_UNIX path
        host = str(address[0])
        return host in ("::1", "localhost") or host.startswith("127.")

    def connect(self, address):
        if self.family == socket.AF_UNIX or loopback(address):
            return real_connect(self, address)
        attempts.append(address)
        raise OSError(f"network disabled in tests: connect to {address}")

    def create_connection(address, *args, **kwargs):
        if loopback(address):
            return real_create(address, *args, **kwargs)
        attempts.append(address)
        raise OSError(f"network disabled in tests: connect to {address}")

    socket.socket.connect = connect
    socket.create_connection = create_connection
    try:
        yield attempts
    finally:
        socket.socket.connect = real_connect
        socket.create_connection = real_create


@pytest.fixture
def network_attempts() -> Iterator[list]:
    with blocked_network() as attempts:
        yield attempts
