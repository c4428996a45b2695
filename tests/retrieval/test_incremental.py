"""Content-based chunk ids, metadata that goes away, and writes that never leave a kind half empty
(fast hashing embedder; issue 13 items 15, 16 and 22)."""

from pathlib import Path

import pytest

from pipelines.retrieval.build import build_knowledge_base, load_all
from pipelines.retrieval.config import BuildKBConfig
from pipelines.retrieval.store import KnowledgeStore
from tests.retrieval.conftest import HashEmbedder, write_jsonl

SENTENCES = [f"Sentence number {i} talks about topic {i * 7 % 11} in class. " for i in range(24)]


def _cfg(sources: list[dict], size: int = 120) -> BuildKBConfig:
    return BuildKBConfig.model_validate(
        {
            "sources": sources,
            "chunking": {"size": size, "overlap": 0, "min_length": 5},
            "store": {"path": "kb"},
            "quality": {"enabled": False},
        }
    )


def _build(root: Path, cfg: BuildKBConfig, embedder: HashEmbedder | None = None) -> dict:
    groups = {"teacher": ["teaching_theory", "class_records"], "psychologist": ["psychology"]}
    return build_knowledge_base(cfg, groups, root=root, embedder=embedder or HashEmbedder(), progress=False)


def test_inserting_a_sentence_near_the_top_re_embeds_only_the_changed_chunks(tmp_path: Path):
    doc = tmp_path / "teach" / "long.txt"
    doc.parent.mkdir()
    doc.write_text("".join(SENTENCES), encoding="utf-8")
    cfg = _cfg([{"name": "teach", "kind": "teaching_theory", "path": "teach"}])
    first = _build(tmp_path, cfg)
    assert first["chunks"] >= 8
    doc.write_text(
        "".join(SENTENCES[:1] + ["A new sentence of about the same length as the others. "] + SENTENCES[1:]),
        encoding="utf-8",
    )
    embedder = HashEmbedder()
    second = _build(tmp_path, cfg, embedder)
    assert 1 <= second["embedded"] <= 4 and second["embedded"] < second["chunks"] / 3, second
    assert second["unchanged"] + second["relabelled"] == second["chunks"] - second["embedded"]
    assert second["relabelled"] > 0  # later chunks moved one position down: a metadata update, no embedding
    assert second["unchanged"] + second["relabelled"] >= 9
    stored = KnowledgeStore(tmp_path / "kb").metadata_by_id("teaching_theory")
    chunks = load_all(cfg, {"teacher": ["teaching_theory"]}, tmp_path).chunks["teaching_theory"]
    position = {c.text: c.metadata["position"] for c in chunks}
    assert "A new sentence of about" in embedder.embedded[0] and max(position[t] for t in embedder.embedded) < 5
    assert sorted(m["position"] for m in stored.values()) == list(range(len(chunks)))
    assert {c.id: c.metadata["position"] for c in chunks} == {i: m["position"] for i, m in stored.items()}


def test_inserting_a_csv_row_without_id_field_shifts_no_other_id(tmp_path: Path):
    rows = [f"Utterance {i}: the student explains step {i} of the fraction problem." for i in range(12)]
    path = tmp_path / "talk.csv"
    path.write_text("text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    cfg = _cfg([{"name": "talk", "kind": "class_records", "path": "talk.csv"}])
    first = _build(tmp_path, cfg)
    ids_before = set(KnowledgeStore(tmp_path / "kb").metadata_by_id("class_records"))
    path.write_text("text\nA brand-new first utterance about decimals.\n" + "\n".join(rows) + "\n", encoding="utf-8")
    embedder = HashEmbedder()
    second = _build(tmp_path, cfg, embedder)
    assert embedder.embedded == ["A brand-new first utterance about decimals."]
    assert (second["new"], second["changed"], second["deleted"]) == (1, 0, 0)
    ids_after = set(KnowledgeStore(tmp_path / "kb").metadata_by_id("class_records"))
    assert ids_before < ids_after and len(ids_after) == first["chunks"] + 1


def test_inserting_a_row_into_row_groups_changes_only_its_group(tmp_path: Path):
    rows = [{"text": f"第{i}句：学生说出了第{i}个想法。"} for i in range(60)]
    write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = _cfg([{"name": "d", "kind": "class_records", "path": "d.jsonl", "rows_per_document": 5}], size=400)
    first = _build(tmp_path, cfg)
    assert 6 <= first["documents"] <= 30  # about 60 / 5 groups, none longer than 10 rows
    write_jsonl(tmp_path / "d.jsonl", rows[:30] + [{"text": "插入的一句新话。"}] + rows[30:])
    second = _build(tmp_path, cfg)
    assert second["embedded"] <= 2 and second["new"] + second["changed"] >= 1
    assert second["unchanged"] >= first["chunks"] - 2


def test_removed_metadata_fields_go_away(tmp_path: Path):
    write_jsonl(tmp_path / "s.jsonl", [{"id": "a", "text": "Never share a password.", "category": "privacy"}])
    source = {"name": "s", "kind": "psychology", "path": "s.jsonl", "id_field": "id"}
    _build(tmp_path, _cfg([{**source, "metadata_fields": ["category"]}]))
    assert next(iter(KnowledgeStore(tmp_path / "kb").metadata_by_id("psychology").values()))["category"] == "privacy"
    embedder = HashEmbedder()
    metrics = _build(tmp_path, _cfg([source]), embedder)
    assert metrics["relabelled"] == 1 and embedder.embedded == []
    meta = next(iter(KnowledgeStore(tmp_path / "kb").metadata_by_id("psychology").values()))
    assert "category" not in meta and meta["doc"] == "s/s.jsonl#a"


class FailingStore(KnowledgeStore):
    """Fails on the second write to a staging collection (a crash in the middle of a rebuild)."""

    writes = 0

    def upsert(self, kind, identity, ids, texts, vectors, metas, *, name=None):
        if name is not None:
            FailingStore.writes += 1
            if FailingStore.writes == 2:
                raise RuntimeError("disk full")
        super().upsert(kind, identity, ids, texts, vectors, metas, name=name)


def test_a_crash_while_rebuilding_a_kind_leaves_the_old_one_whole(tmp_path: Path, monkeypatch):
    write_jsonl(tmp_path / "n.jsonl", [{"id": str(i), "text": f"Note {i} on sleep and memory."} for i in range(30)])
    cfg = _cfg([{"name": "n", "kind": "psychology", "path": "n.jsonl", "id_field": "id"}])
    _build(tmp_path, cfg)
    before = KnowledgeStore(tmp_path / "kb").metadata_by_id("psychology")
    monkeypatch.setattr("pipelines.retrieval.build.WRITE_BATCH", 10)
    monkeypatch.setattr("pipelines.retrieval.build.KnowledgeStore", FailingStore)
    other = HashEmbedder()
    other.identity = "hash-test:other"
    with pytest.raises(RuntimeError, match="disk full"):
        _build(tmp_path, cfg, other)
    store = KnowledgeStore(tmp_path / "kb")
    assert store.metadata_by_id("psychology") == before and store.embedder_of("psychology") == "hash-test:128"
    monkeypatch.setattr("pipelines.retrieval.build.KnowledgeStore", KnowledgeStore)
    metrics = _build(tmp_path, cfg, other)  # the next build drops the half-written staging collection
    assert metrics["rebuilt_kinds"] == ["psychology"] and metrics["stored_by_kind"]["psychology"] == 30
    names = {c.name for c in KnowledgeStore(tmp_path / "kb").client.list_collections()}
    assert names == {"edumas_psychology"}


def test_recover_finishes_a_swap_that_stopped_after_the_staging_collection_was_complete(tmp_path: Path):
    write_jsonl(tmp_path / "n.jsonl", [{"id": "1", "text": "Spaced practice beats cramming."}])
    cfg = _cfg([{"name": "n", "kind": "psychology", "path": "n.jsonl", "id_field": "id"}])
    _build(tmp_path, cfg)
    store = KnowledgeStore(tmp_path / "kb")
    vectors = HashEmbedder().encode_documents(["Interleaving mixes problem types."]).dense
    staging = store.staging("psychology", "hash-test:new")
    store.upsert(
        "psychology",
        "hash-test:new",
        ["x"],
        ["Interleaving mixes problem types."],
        vectors,
        [{"doc": "d"}],
        name=staging,
    )
    store.collection("psychology", name=staging).modify(name="edumas_psychology__complete")
    assert KnowledgeStore(tmp_path / "kb").recover() == ["psychology"]
    assert store.embedder_of("psychology") == "hash-test:new" and store.count("psychology") == 1


def test_an_embedder_failing_halfway_leaves_the_store_as_it_was(tmp_path: Path, monkeypatch):
    write_jsonl(tmp_path / "n.jsonl", [{"id": str(i), "text": f"Note {i} about feedback."} for i in range(20)])
    cfg = _cfg([{"name": "n", "kind": "psychology", "path": "n.jsonl", "id_field": "id"}])
    _build(tmp_path, cfg)
    before = KnowledgeStore(tmp_path / "kb").metadata_by_id("psychology")
    write_jsonl(tmp_path / "n.jsonl", [{"id": str(i), "text": f"Edited note {i} about praise."} for i in range(20)])

    class Breaks(HashEmbedder):
        def encode_documents(self, texts):
            if self.embedded:
                raise RuntimeError("CUDA out of memory")
            return super().encode_documents(texts)

    monkeypatch.setattr("pipelines.retrieval.build.EMBED_BATCH", 5)
    with pytest.raises(RuntimeError, match="out of memory"):
        _build(tmp_path, cfg, Breaks())
    assert KnowledgeStore(tmp_path / "kb").metadata_by_id("psychology") == before
