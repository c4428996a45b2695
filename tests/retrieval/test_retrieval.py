"""Retrieval with the real offline embedder (all-MiniLM-L6-v2) on documents from the demo knowledge
base: dense and multi-query results, filters, groups, and no network connection on the way."""

import asyncio
import json
from pathlib import Path

import pytest

from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.retrieval.build import build_knowledge_base
from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
from pipelines.retrieval.retriever import Retriever
from pipelines.retrieval.rewrite import QueryRewriter
from pipelines.retrieval.store import KnowledgeStore
from tests.retrieval.conftest import PROJECT, blocked_network, write_jsonl

PICK = {
    "teaching_methods": ["tm-en-01", "tm-en-05", "tm-en-12", "tm-zh-05", "tm-zh-14"],
    "psychology": ["ps-en-01", "ps-en-04", "ps-en-15", "ps-zh-08"],
    "safety_prompts": ["sf-en-01", "sf-en-08", "sf-en-16", "sf-en-19", "sf-zh-09"],
}
KINDS = {"teaching_methods": "teaching_theory", "psychology": "psychology", "safety_prompts": "safety"}


def demo_subset(root: Path) -> BuildKBConfig:
    """A few documents of each demo kind, copied into ``root`` (keeps the embedding step short)."""
    sources = []
    for name, ids in PICK.items():
        src = next((PROJECT / "data" / "kb_sources" / name).glob("*.jsonl"))
        rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
        write_jsonl(root / name / src.name, [r for r in rows if r["id"] in ids])
        fields = ["prompt", "response"] if name == "safety_prompts" else ["title", "text"]
        meta = ["category"] if name == "safety_prompts" else []
        sources.append(
            {
                "name": name,
                "kind": KINDS[name],
                "path": name,
                "id_field": "id",
                "text_fields": fields,
                "metadata_fields": meta,
            }
        )
    return BuildKBConfig.model_validate({"sources": sources, "store": {"path": "kb"}, "quality": {"enabled": False}})


@pytest.fixture(scope="module")
def kb(tmp_path_factory, minilm):
    root = tmp_path_factory.mktemp("demo_kb")
    cfg = demo_subset(root)
    with blocked_network() as attempts:
        metrics = build_knowledge_base(cfg, RetrievalConfig().groups, root=root, embedder=minilm, progress=False)
    assert attempts == []
    return root, cfg, metrics


def _retriever(kb, minilm, rewriter=None, **cfg):
    root, build_cfg, _ = kb
    return Retriever(KnowledgeStore(root / "kb"), minilm, RetrievalConfig(**cfg), rewriter=rewriter)


@pytest.mark.parametrize(
    ("query", "group", "doc"),
    [
        ("How can a tutor lead a student to find the answer by asking questions?", "teacher", "tm-en-01"),
        ("how long should I pause after asking the class a question", "teacher", "tm-en-12"),
        ("student's mind goes blank during exams because of nerves", "psychologist", "ps-en-01"),
        ("why students put off their homework until the last minute", "psychologist", "ps-en-15"),
        ("a student asks for help hacking the school system to change grades", "ethics", "sf-en-01"),
        ("looking up someone's home address and phone number", "ethics", "sf-en-16"),
    ],
)
def test_dense_retrieval_returns_the_expected_document(kb, minilm, query, group, doc):
    hits = _retriever(kb, minilm).dense(query, group=group, top_k=3)
    assert hits[0].source.endswith(f"#{doc}")
    assert hits[0].scores["dense"] > hits[-1].scores["dense"] or len(hits) == 1
    assert {h.kind for h in hits} <= set(RetrievalConfig().groups[group])


def test_multi_query_finds_documents_through_rewrites(kb, minilm, network_attempts):
    backend = ScriptedBackend(
        [(r"Query: qqq zzz", "1. student is very anxious before exams\n2. Why do students procrastinate?")]
    )
    retriever = _retriever(kb, minilm, QueryRewriter(LLM(backend), 2), per_query_k=3)
    hits = asyncio.run(retriever.retrieve("qqq zzz", group="psychologist", top_k=4))
    sources = [h.source.rsplit("#", 1)[1] for h in hits]
    assert {"ps-en-01", "ps-en-15"} <= set(sources)
    assert len({h.id for h in hits}) == len(hits)
    anxiety = hits[sources.index("ps-en-01")]
    assert "student is very anxious before exams" in anxiety.found_by
    assert anxiety.scores["rrf"] > 0 and anxiety.kind == "psychology"
    assert [h.scores["rrf"] for h in hits] == sorted((h.scores["rrf"] for h in hits), reverse=True)
    assert network_attempts == []


def test_metadata_filter_and_kinds(kb, minilm):
    retriever = _retriever(kb, minilm)
    hits = retriever.dense("insulting a classmate's body", kinds=["safety"], where={"category": "insult"}, top_k=5)
    assert hits and all(h.metadata["category"] == "insult" for h in hits)
    assert hits[0].source.endswith("#sf-en-08")
    with pytest.raises(KeyError, match="unknown expert group 'nurse'"):
        retriever.dense("x", group="nurse")


def test_concurrent_retrievals_get_the_hits_they_get_alone(kb, minilm):
    cases = [
        ("a tutor asks questions to lead the student", "teacher"),
        ("nervous before the exam", "psychologist"),
        ("hacking the school system", "ethics"),
        ("waiting after asking the class a question", "teacher"),
        ("putting off homework", "psychologist"),
    ]

    def run(concurrent: bool):
        retriever = _retriever(kb, minilm, per_query_k=3)

        async def main():
            calls = [retriever.retrieve(q, group=g, top_k=4, rewrites=[q.upper()]) for q, g in cases]
            if concurrent:
                return await asyncio.gather(*calls)
            return [await call for call in calls]

        results = asyncio.run(main())
        return [[(h.id, h.scores, h.found_by) for h in r] for r in results], retriever.searches.queries

    alone, queries_alone = run(False)
    together, queries_together = run(True)
    assert together == alone and all(alone)
    assert queries_alone == 3 + 1 + 1 + 3 + 1  # one Chroma query per kind of each group
    assert queries_together <= queries_alone


ENGLISH_TURNS = [  # (topic, answer, reply) as a RAM2C group queries the knowledge bases
    ("Why does the keeper's apprentice climb the tower every night?", "To light the lamp so ships are safe.",
     "Good! What does that tell us about his sense of duty?"),
    ("How does the storm change the apprentice?", "He gets scared but then he is brave.",
     "Yes, fear and courage together. Can you find a sentence that shows it?"),
    ("What would you do if you were alone on the island?", "I would build a house and look for food.",
     "That's practical thinking! Why would shelter come first?"),
]


def _languages(kb, minilm, **kwargs) -> list[str]:
    retriever = _retriever(kb, minilm)

    async def run():
        found = []
        for turn in ENGLISH_TURNS:
            for group in ("teacher", "psychologist", "ethics"):
                result = await retriever.retrieve("\n".join(turn), group=group, top_k=3, **kwargs)
                found += [hit.metadata["language"] for hit in result]
        return found

    return asyncio.run(run())


def test_retrieval_keeps_to_the_dialogue_language(kb, minilm):
    unfiltered = _languages(kb, minilm)
    assert "zh" in unfiltered  # the bilingual knowledge base answers English dialogues with Chinese documents
    english = _languages(kb, minilm, language="en")
    assert len(english) == len(unfiltered) and set(english) == {"en"}
    hits = _retriever(kb, minilm).dense("学生考试前很紧张怎么办", group="psychologist", top_k=5, language="zh")
    assert hits and {h.metadata["language"] for h in hits} == {"zh"}


def test_a_language_joins_other_filters():
    from pipelines.retrieval.retriever import with_language

    assert with_language(None, None) is None and with_language({"category": "x"}, None) == {"category": "x"}
    assert with_language(None, "en") == {"language": "en"}
    assert with_language({"category": "x"}, "zh") == {"$and": [{"category": "x"}, {"language": "zh"}]}
