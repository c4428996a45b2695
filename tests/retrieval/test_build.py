"""Incremental rebuilds and failed builds, on the store logic (fast hashing embedder)."""

from pathlib import Path

import pytest

from pipelines.retrieval.build import build_knowledge_base, load_all
from pipelines.retrieval.loaders import KBBuildError
from pipelines.retrieval.store import KnowledgeStore
from tests.retrieval.conftest import HashEmbedder, write_jsonl


def _build(root, cfg, groups, embedder=None):
    return build_knowledge_base(cfg, groups, root=root, embedder=embedder or HashEmbedder(), progress=False)


def test_first_build_metadata_and_counts(corpus, groups):
    root, cfg = corpus
    metrics = _build(root, cfg, groups)
    loaded = load_all(cfg, groups, root)
    total = sum(len(c) for c in loaded.chunks.values())
    assert metrics["chunks"] == total == metrics["new"] == metrics["embedded"]
    assert metrics["files"] == 5 and metrics["empty_files_skipped"] == 1 and metrics["documents"] == 6
    assert metrics["changed"] == metrics["deleted"] == metrics["unchanged"] == 0
    store = KnowledgeStore(root / "kb")
    assert {k: store.count(k) for k in ("teaching_theory", "psychology", "safety")} == {
        k: metrics["chunks_by_kind"][k] for k in ("teaching_theory", "psychology", "safety")
    }
    meta = store.metadata_by_id("safety")
    assert {m["doc"]: m["category"] for m in meta.values()} == {
        "safety/prompts.csv#s1": "insult",
        "safety/prompts.csv#s2": "privacy_and_property",
    }
    one = next(iter(meta.values()))
    assert {k: one[k] for k in ("kind", "group", "file", "language")} == {
        "kind": "safety",
        "group": "ethics",
        "file": "safety/prompts.csv",
        "language": "en",
    }
    coll = store.collection("safety")
    assert coll.configuration["hnsw"]["space"] == "cosine" and "hnsw:space" not in (coll.metadata or {})


def test_incremental_rebuild_counts(corpus, groups):
    root, cfg = corpus
    first = _build(root, cfg, groups)
    embedder = HashEmbedder()
    again = _build(root, cfg, groups, embedder)
    assert again["embedded"] == 0 and again["new"] == 0 and again["unchanged"] == first["chunks"]
    assert embedder.embedded == []
    # edit one document, add one, remove one file
    write_jsonl(
        root / "psy" / "notes.jsonl",
        [
            {"id": "anx", "text": "Test anxiety makes the mind go blank; expressive writing before exams helps."},
            {"id": "mot", "text": "学习动机分为内部动机和外部动机，教师应激发学生的求知欲和好奇心。"},
            {"id": "new", "text": "Self-efficacy grows from mastery experiences more than from praise."},
        ],
    )
    (root / "teach" / "questioning.md").unlink()
    removed = len([c for c in load_all(cfg, groups, root).chunks["teaching_theory"]])
    embedder = HashEmbedder()
    third = _build(root, cfg, groups, embedder)
    assert third["changed"] == 1 and third["new"] == 1
    assert third["deleted"] == first["chunks_by_kind"]["teaching_theory"] - removed > 0
    assert sorted(embedder.embedded) == sorted(
        [
            "Test anxiety makes the mind go blank; expressive writing before exams helps.",
            "Self-efficacy grows from mastery experiences more than from praise.",
        ]
    )
    store = KnowledgeStore(root / "kb")
    assert store.count("psychology") == third["chunks_by_kind"]["psychology"]
    assert store.count("teaching_theory") == removed
    assert not any("blank; slow breathing" in d for d in store.collection("psychology").get()["documents"])


def test_group_change_relabels_without_embedding(corpus, groups):
    root, cfg = corpus
    first = _build(root, cfg, groups)
    embedder = HashEmbedder()
    metrics = _build(root, cfg, {**groups, "counsellor": ["psychology", "safety"]}, embedder)
    by_kind = first["chunks_by_kind"]
    assert metrics["relabelled"] == by_kind["psychology"] + by_kind["safety"] and embedder.embedded == []
    groups_stored = {m["group"] for m in KnowledgeStore(root / "kb").metadata_by_id("psychology").values()}
    assert groups_stored == {"counsellor,psychologist"}


def test_other_embedder_rebuilds_the_collections(corpus, groups):
    root, cfg = corpus
    _build(root, cfg, groups)
    other = HashEmbedder()
    other.identity = "hash-test:other"
    metrics = _build(root, cfg, groups, other)
    assert sorted(metrics["rebuilt_kinds"]) == ["psychology", "safety", "teaching_theory"]
    assert metrics["embedded"] == metrics["chunks"]
    assert KnowledgeStore(root / "kb").embedder_of("safety") == "hash-test:other"


@pytest.mark.parametrize("breakage", ["corrupt", "csv_field", "missing_folder"])
def test_failed_build_leaves_previous_store_intact_and_queryable(corpus, groups, breakage):
    root, cfg = corpus
    _build(root, cfg, groups)
    before = {k: KnowledgeStore(root / "kb").metadata_by_id(k) for k in ("teaching_theory", "psychology", "safety")}
    # a valid change that would be applied if the build went through
    write_jsonl(root / "psy" / "notes.jsonl", [{"id": "x", "text": "A completely different psychology note here."}])
    if breakage == "corrupt":
        (root / "teach" / "sub" / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
        match = r"latin1\.txt: not UTF-8 .* at byte offset 3"
    elif breakage == "csv_field":
        (root / "safety" / "prompts.csv").write_text("id,category,question,answer\ns9,insult,q,a\n", encoding="utf-8")
        match = r"prompts\.csv:2: field\(s\) \['prompt', 'response'\] not found"
    else:
        import shutil

        shutil.rmtree(root / "safety")
        match = r"source 'safety': .*safety does not exist"
    embedder = HashEmbedder()
    with pytest.raises(KBBuildError, match=match):
        _build(root, cfg, groups, embedder)
    assert embedder.embedded == []
    store = KnowledgeStore(root / "kb")
    after = {k: store.metadata_by_id(k) for k in before}
    assert after == before
    hits = store.query("psychology", HashEmbedder().encode_queries(["Test anxiety makes the mind go blank"]).dense, 1)
    assert hits[0][0].metadata["doc"] == "psy/notes.jsonl#anx"


def test_nothing_to_build_is_an_error(tmp_path: Path, groups):
    from tests.retrieval.conftest import small_config

    (tmp_path / "teach").mkdir()
    (tmp_path / "psy").mkdir()
    (tmp_path / "safety").mkdir()
    with pytest.raises(KBBuildError, match="no chunks from any source"):
        _build(tmp_path, small_config(tmp_path), groups)


def test_build_and_query_make_no_connection_and_never_use_chromas_embedder(corpus, groups, monkeypatch):
    import chromadb.api.types as chroma_types

    from tests.retrieval.conftest import blocked_network

    used = []

    def forbidden(self, input):  # noqa: A002 - the signature Chroma checks
        used.append(type(self).__name__)
        raise AssertionError("Chroma's default embedding function must never run (it downloads a model)")

    monkeypatch.setattr(chroma_types.DefaultEmbeddingFunction, "__call__", forbidden)
    root, cfg = corpus
    with blocked_network() as attempts:
        metrics = _build(root, cfg, groups)
        store = KnowledgeStore(root / "kb")
        hits = store.query("safety", HashEmbedder().encode_queries(["Find my classmate's home address."]).dense, 1)
    assert metrics["embedded"] == metrics["chunks"]
    assert hits[0][0].metadata["doc"] == "safety/prompts.csv#s2"
    assert attempts == [] and used == []


def test_stored_metadata_is_read_in_pages(corpus, groups):
    root, cfg = corpus
    _build(root, cfg, groups)
    whole = KnowledgeStore(root / "kb").metadata_by_id("teaching_theory")
    paged = KnowledgeStore(root / "kb", page_size=1).metadata_by_id("teaching_theory")
    assert len(whole) > 2 and paged == whole
