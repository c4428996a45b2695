"""The knowledge base on a Chroma server (``build_kb.store.backend: server``), against a real
``chroma run`` process: a build stored there answers like the same build in a local folder,
several processes read it at once, and an unreachable server stops the stage with the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.retrieval.build import build_knowledge_base
from pipelines.retrieval.config import ChromaServerConfig, RetrievalConfig
from pipelines.retrieval.retriever import Retriever
from pipelines.retrieval.store import KnowledgeStore, StoreUnavailable
from tests.retrieval.conftest import HashEmbedder, small_config, small_corpus
from tests.support.chroma_server import ChromaServer, chroma_command, free_port

PROJECT = Path(__file__).resolve().parents[2]
QUERIES = ["open questions and waiting time", "test anxiety breathing", "home address of a classmate", "分数的意义"]

pytestmark = pytest.mark.skipif(chroma_command() is None, reason="the chroma command (chromadb) is not installed")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ChromaServer(tmp_path_factory.mktemp("chroma") / "kb") as running:
        yield running


def server_config(tmp_path: Path, server: ChromaServer, prefix: str):
    cfg = small_config(tmp_path)
    store = cfg.store.model_copy(update={"backend": "server", "server": server.config, "collection_prefix": prefix})
    return cfg.model_copy(update={"store": store})


def top_hits(store: KnowledgeStore) -> list[list[tuple[str, float]]]:
    retriever = Retriever(store, HashEmbedder(), RetrievalConfig(n_rewrites=0, top_k=3))
    out = []
    for query in QUERIES:
        hits = retriever.dense(query, kinds=["teaching_theory", "psychology", "safety"], top_k=3)
        out.append([(h.id, round(h.score, 4)) for h in hits])
    return out


def test_a_build_on_the_server_answers_like_one_in_a_folder(tmp_path, server):
    small_corpus(tmp_path)
    groups = RetrievalConfig().groups
    local_cfg = small_config(tmp_path)
    remote_cfg = server_config(tmp_path, server, "same_")
    local = build_knowledge_base(local_cfg, groups, root=tmp_path, embedder=HashEmbedder(), progress=False)
    remote = build_knowledge_base(remote_cfg, groups, root=tmp_path, embedder=HashEmbedder(), progress=False)
    assert remote["chunks_by_kind"] == local["chunks_by_kind"]
    assert remote["chunk_ids_sha256"] == local["chunk_ids_sha256"]
    remote_store = KnowledgeStore.open(remote_cfg.store, tmp_path)
    assert remote_store.where == server.url and remote_store.count("safety") == local["chunks_by_kind"]["safety"]
    assert top_hits(remote_store) == top_hits(KnowledgeStore.open(local_cfg.store, tmp_path))
    # an incremental rebuild finds everything in place on the server
    again = build_knowledge_base(remote_cfg, groups, root=tmp_path, embedder=HashEmbedder(), progress=False)
    assert again["new"] == 0 and again["unchanged"] == remote["chunks"]


READER = """
import json, sys
from pipelines.retrieval.config import ChromaServerConfig
from pipelines.retrieval.store import KnowledgeStore
from tests.retrieval.test_chroma_server import top_hits
store = KnowledgeStore(".", "readers_", server=ChromaServerConfig(port=int(sys.argv[1])))
print(json.dumps([top_hits(store) for _ in range(int(sys.argv[2]))][-1]))
"""


@pytest.mark.slow
def test_several_processes_read_one_store_at_once(tmp_path, server):
    small_corpus(tmp_path)
    cfg = server_config(tmp_path, server, "readers_")
    build_knowledge_base(cfg, RetrievalConfig().groups, root=tmp_path, embedder=HashEmbedder(), progress=False)
    expected = top_hits(KnowledgeStore.open(cfg.store, tmp_path))
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, str(server.port), "5"], cwd=PROJECT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outputs = [reader.communicate(timeout=120)[0] for reader in readers]
    assert all(reader.returncode == 0 for reader in readers)
    assert [json.loads(out) for out in outputs] == [[[list(hit) for hit in hits] for hits in expected]] * 4


def test_an_unreachable_server_names_the_command_that_starts_one(tmp_path):
    port = free_port()
    command = f"chroma run --path <build_kb.store.path> --host 127.0.0.1 --port {port}"
    with pytest.raises(StoreUnavailable, match=command):
        KnowledgeStore(tmp_path, server=ChromaServerConfig(port=port))
    with pytest.raises(StoreUnavailable, match="CHROMA_TOKEN_UNSET"):
        KnowledgeStore(tmp_path, server=ChromaServerConfig(port=port, token_env="CHROMA_TOKEN_UNSET"))
