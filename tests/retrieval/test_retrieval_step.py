"""The retrieval step: off the event loop, traceable (queries, hits with ids, kinds and scores,
latency, the rewriter's record), rerank keeps the tail, and quality labels are checked."""

import asyncio
import threading

import pytest

from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.retrieval.build import build_knowledge_base
from pipelines.retrieval.config import RerankConfig, RetrievalConfig
from pipelines.retrieval.loaders import KBBuildError
from pipelines.retrieval.quality import check_labels
from pipelines.retrieval.retriever import Retriever
from pipelines.retrieval.rewrite import QueryRewriter
from pipelines.retrieval.store import KnowledgeStore
from tests.retrieval.conftest import HashEmbedder


@pytest.fixture
def built(corpus, groups):
    root, cfg = corpus
    build_knowledge_base(cfg, groups, root=root, embedder=HashEmbedder(), progress=False)
    return root


class ThreadNoting(HashEmbedder):
    def __init__(self):
        super().__init__()
        self.threads: list[int] = []

    def encode_queries(self, texts):
        self.threads.append(threading.get_ident())
        return super().encode_queries(texts)


def test_embedding_and_chroma_queries_run_off_the_event_loop(built):
    embedder = ThreadNoting()
    retriever = Retriever(KnowledgeStore(built / "kb"), embedder, RetrievalConfig())

    async def main():
        loop_thread = threading.get_ident()
        await asyncio.gather(*(retriever.retrieve(q, top_k=2) for q in ("anxiety", "questions", "address")))
        return loop_thread

    loop_thread = asyncio.run(main())
    assert len(embedder.threads) == 3 and loop_thread not in embedder.threads


class FakeTrace:
    def __init__(self):
        self.rows = []

    def add(self, record, **extra):
        self.rows.append({"agent": record.agent, "ok": record.ok, "prompt": record.prompt})

    def add_result(self, agent, role, *, result, ok=True, error=None, inputs=None, latency_s=0.0, **extra):
        self.rows.append({"agent": agent, "role": role, "result": result, "inputs": inputs, "latency_s": latency_s})


def test_retrieve_reports_what_it_did_for_the_trace(built):
    backend = ScriptedBackend([(r"Query: mind goes blank", "1. test anxiety and exams\n2. nerves before a test")])
    rewriter = QueryRewriter(LLM(backend), 2)
    retriever = Retriever(KnowledgeStore(built / "kb"), HashEmbedder(), RetrievalConfig(), rewriter=rewriter)
    result = asyncio.run(retriever.retrieve("mind goes blank", group="psychologist", top_k=3))
    assert result.queries == ["mind goes blank", "test anxiety and exams", "nerves before a test"]
    assert result.kinds == ["psychology"] and result.latency_s > 0 and len(result) == len(result.hits) >= 1
    assert result[0] is result.hits[0] and [h.id for h in result] == [h.id for h in result.hits]
    step = result.trace_dict()
    assert step["agent"] == "retrieval" and step["role"] == "psychologist"
    assert step["inputs"]["queries"] == result.queries
    first = step["result"]["hits"][0]
    assert first["id"] == result[0].id and first["kind"] == "psychology" and first["score"] == result[0].scores["rrf"]
    trace = FakeTrace()
    result.add_to(trace)
    assert [r["agent"] for r in trace.rows] == ["query_rewriter", "retrieval"] and trace.rows[0]["ok"]
    assert trace.rows[1]["latency_s"] == round(result.latency_s, 6)


class ReverseReranker:
    """Scores passages by reversed position: the reranked head comes back in reverse order."""

    def score(self, query, passages):
        return [float(i) for i in range(len(passages))]


def test_rerank_keeps_the_tail_after_the_reranked_candidates(built):
    cfg = RetrievalConfig(top_k=6, per_query_k=10, rerank=RerankConfig(enabled=True, candidates=2))
    plain = Retriever(KnowledgeStore(built / "kb"), HashEmbedder(), cfg.model_copy(update={"rerank": RerankConfig()}))
    fused = asyncio.run(plain.retrieve("students and teachers", top_k=6))
    assert len(fused) == 6
    reranked = Retriever(KnowledgeStore(built / "kb"), HashEmbedder(), cfg, reranker=ReverseReranker())
    hits = asyncio.run(reranked.retrieve("students and teachers", top_k=6))
    assert [h.id for h in hits] == [fused[1].id, fused[0].id] + [h.id for h in fused[2:6]]
    assert "rerank" in hits[0].scores and "rerank" not in hits[2].scores


def test_unknown_relevant_ids_fail_naming_them_unless_their_source_was_left_out():
    queries = [
        {"id": "q1", "query": "a", "relevant": ["psy/notes.jsonl#anx", "psy/notes.jsonl#typo"]},
        {"id": "q2", "query": "b", "relevant": ["dialogid/d.csv#h1"]},
    ]
    known = {"psy/notes.jsonl#anx"}
    with pytest.raises(KBBuildError, match=r"q\.jsonl: 2 relevant id\(s\) match no stored document: "):
        check_labels(queries, known, path="q.jsonl")
    with pytest.raises(KBBuildError, match=r"1 relevant id\(s\) match no stored document: psy/notes.jsonl#typo;"):
        check_labels(queries, known, missing_sources=["dialogid"])
    kept = check_labels(queries, known | {"psy/notes.jsonl#typo"}, missing_sources=["dialogid"])
    assert kept == [queries[0]]
