"""The ``build_kb`` stage end to end in a scratch project: params, build, quality report, metrics,
an optional source that is absent, a rebuild that embeds nothing, and a clear failure exit."""

import json
from pathlib import Path

import yaml

import pipelines.retrieval.service as service
from stages import build_kb
from tests.retrieval.conftest import small_corpus, write_jsonl


def _project(root: Path) -> Path:
    small_corpus(root / "data")
    write_jsonl(
        root / "data" / "queries.jsonl",
        [
            {
                "id": "q1",
                "group": "psychologist",
                "query": "my mind goes blank in tests",
                "relevant": ["psy/notes.jsonl#anx"],
            },
            {
                "id": "q2",
                "group": "ethics",
                "query": "find a classmate's address",
                "relevant": ["safety/prompts.csv#s2"],
            },
            {
                "id": "q3",
                "group": "teacher",
                "query": "open questions and wait time",
                "relevant": ["teach/questioning.md#0"],
            },
        ],
    )
    write_jsonl(root / "data" / "replies.jsonl", [{"match": "Query: ", "reply": "1. exam stress\n2. personal details"}])
    params = {
        "build_kb": {
            "sources": [
                {"name": "teach", "kind": "teaching_theory", "path": "data/teach"},
                {"name": "psy", "kind": "psychology", "path": "data/psy", "id_field": "id"},
                {
                    "name": "safety",
                    "kind": "safety",
                    "path": "data/safety",
                    "id_field": "id",
                    "text_fields": ["prompt", "response"],
                    "metadata_fields": ["category"],
                },
                {"name": "crusoe", "kind": "literature", "path": "../absent/robinson.txt", "optional": True},
            ],
            "chunking": {"size": 120, "overlap": 20, "min_length": 10},
            "store": {"path": "data/kb"},
            "quality": {
                "queries": "data/queries.jsonl",
                "ks": [1, 3],
                "llm": {"default": {"kind": "scripted", "replies": "data/replies.jsonl"}, "cache": "data/llm.sqlite"},
            },
        },
        "retrieval": {"n_rewrites": 2, "per_query_k": 4},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    return root


def test_stage_builds_scores_and_rebuilds_incrementally(tmp_path, monkeypatch, minilm):
    monkeypatch.chdir(_project(tmp_path))
    monkeypatch.setattr(service, "build_embedder", lambda cfg: minilm)  # reuse the session's loaded model
    assert build_kb.main([]) == 0
    metrics = json.loads(Path("reports/build_kb/metrics.json").read_text())
    assert metrics["optional_sources_missing"] == ["crusoe"]
    manifest = json.loads(Path("data/kb/manifest.json").read_text())  # the DVC out of the store
    assert manifest["chunks_by_kind"] == metrics["chunks_by_kind"] and set(manifest) == {
        "embedder", "chunks_by_kind", "chunk_ids_sha256"}
    assert metrics["new"] == metrics["chunks"] > 0 and metrics["files"] == 5 and metrics["empty_files_skipped"] == 1
    assert metrics["chunks_per_s"] > 0
    quality = json.loads(Path("reports/build_kb/retrieval_quality.json").read_text())
    assert quality["queries"] == 3 and quality["n_rewrites"] == 2 and quality["rewrite_failures"] == 0
    assert set(quality["dense"]) == {"recall@1", "recall@3", "mrr"} == set(quality["multi_query_rrf"])
    assert quality["dense"]["mrr"] > 0.5
    assert metrics["quality"]["dense"] == quality["dense"]
    assert quality["llm_usage"]["total"]["calls"] == 3
    assert build_kb.main([]) == 0
    again = json.loads(Path("reports/build_kb/metrics.json").read_text())
    assert json.loads(Path("data/kb/manifest.json").read_text()) == manifest  # same store, same manifest
    assert again["embedded"] == 0 and again["unchanged"] == metrics["chunks"]
    quality = json.loads(Path("reports/build_kb/retrieval_quality.json").read_text())
    assert quality["llm_usage"]["total"]["cache_hits"] == 3  # rewrites replayed from the request cache
    params = yaml.safe_load(Path("params.yaml").read_text(encoding="utf-8"))
    params["build_kb"]["quality"]["enabled"] = False
    Path("params.yaml").write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    assert build_kb.main([]) == 0
    quality = json.loads(Path("reports/build_kb/retrieval_quality.json").read_text())
    assert quality["enabled"] is False and "dense" not in quality  # the DVC metric exists, without stale scores


def test_stage_failure_exits_with_a_clear_message(tmp_path, monkeypatch, capsys, minilm):
    monkeypatch.chdir(_project(tmp_path))
    monkeypatch.setattr(service, "build_embedder", lambda cfg: minilm)
    (tmp_path / "data" / "psy" / "bad.txt").write_bytes(b"ok \xff\xfe")
    assert build_kb.main([]) == 1
    err = capsys.readouterr().err
    assert "bad.txt: not UTF-8 (invalid byte 0xff at byte offset 3)" in err and "unchanged" in err
    assert not Path("reports/build_kb/metrics.json").exists()


def test_stage_rejects_unknown_keys(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(_project(tmp_path))
    params = yaml.safe_load(Path("params.yaml").read_text())
    params["retrieval"]["rrf"] = 60
    Path("params.yaml").write_text(yaml.safe_dump(params))
    assert build_kb.main([]) == 2
    assert "retrieval.rrf: unknown key" in capsys.readouterr().err
    assert build_kb.main(["--params", "missing.yaml"]) in (1, 2)
    assert "missing.yaml" in capsys.readouterr().err
