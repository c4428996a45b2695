"""The manifest's per-kind digests (the DVC dependency of the stages that read the store) cover the
real chunk ids and metadata: a content change with equal counts changes them, a rebuild does not."""

import hashlib
from pathlib import Path

import yaml

from pipelines.retrieval.build import build_knowledge_base
from tests.retrieval.conftest import HashEmbedder, write_jsonl

EMPTY = hashlib.sha256(b"").hexdigest()


def _build(root, cfg, groups):
    return build_knowledge_base(cfg, groups, root=root, embedder=HashEmbedder(), progress=False)


def test_digest_changes_with_content_at_equal_counts(corpus, groups):
    root, cfg = corpus
    first = _build(root, cfg, groups)
    digests = first["chunk_ids_sha256"]
    assert all(digests[k] != EMPTY for k in ("teaching_theory", "psychology", "safety"))
    assert _build(root, cfg, groups)["chunk_ids_sha256"] == digests  # same store, same digests
    write_jsonl(
        root / "psy" / "notes.jsonl",
        [
            {"id": "anx", "text": "Test anxiety makes the mind go blank; slow breathing and mock exams help."},
            {"id": "mot", "text": "学习动机分为内部动机和外部动机，教师应激发学生的求知欲和好奇心。"},
        ],
    )
    edited = _build(root, cfg, groups)
    assert edited["chunks_by_kind"] == first["chunks_by_kind"] and edited["changed"] == 1
    assert edited["chunk_ids_sha256"]["psychology"] != digests["psychology"]
    assert edited["chunk_ids_sha256"]["safety"] == digests["safety"]


def test_digest_changes_with_a_label(corpus, groups):
    root, cfg = corpus
    first = _build(root, cfg, groups)
    csv = root / "safety" / "prompts.csv"
    csv.write_text(csv.read_text(encoding="utf-8").replace("s1,insult", "s1,abuse"), encoding="utf-8")
    relabelled = _build(root, cfg, groups)
    assert relabelled["relabelled"] >= 1 and relabelled["embedded"] == 0
    assert relabelled["chunks_by_kind"] == first["chunks_by_kind"]
    assert relabelled["chunk_ids_sha256"]["safety"] != first["chunk_ids_sha256"]["safety"]


def test_the_manifest_is_what_the_readers_of_the_store_depend_on():
    """So a changed digest reruns them under ``dvc repro`` (the store folder itself is no DVC out)."""
    stages = yaml.safe_load((Path(__file__).resolve().parents[2] / "dvc.yaml").read_text())["stages"]
    assert "data/kb/manifest.json" in stages["build_kb"]["outs"]
    for reader in ("generate_ram2c", "evaluate"):
        assert "data/kb/manifest.json" in stages[reader]["deps"], reader
