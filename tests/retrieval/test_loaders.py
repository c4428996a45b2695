"""Reading sources: formats, recursion, field mapping, caps, and errors that name file and place."""

from pathlib import Path

import pytest

from pipelines.retrieval.config import SourceConfig
from pipelines.retrieval.loaders import KBBuildError, LoadStats, detect_language, load_source
from tests.retrieval.conftest import small_corpus, write_jsonl


def test_formats_recursion_mapping_and_empty_files(tmp_path: Path):
    small_corpus(tmp_path)
    stats = LoadStats()
    teach = load_source(SourceConfig(name="teach", kind="teaching_theory", path="teach"), tmp_path, stats)
    assert [d.doc_id for d in teach] == ["teach/questioning.md#0", "teach/sub/fractions.txt#0"]
    assert [d.language for d in teach] == ["en", "zh"]
    assert stats.files == 3 and stats.empty_files == 1
    safety = load_source(
        SourceConfig(
            name="safety",
            kind="safety",
            path="safety",
            id_field="id",
            text_fields=["prompt", "response"],
            metadata_fields=["category"],
        ),
        tmp_path,
    )
    assert [d.doc_id for d in safety] == ["safety/prompts.csv#s1", "safety/prompts.csv#s2"]
    assert (
        safety[0].text == "You are a stupid robot.\nI'm sorry my answer did not help; let's try another way together."
    )
    assert safety[1].metadata == {"category": "privacy_and_property"}


def test_caps_and_rows_per_document(tmp_path: Path):
    write_jsonl(tmp_path / "u.jsonl", [{"id": str(i), "text": f"第{i}句话。", "label": str(i % 2)} for i in range(7)])
    stats = LoadStats()
    src = SourceConfig(
        name="u",
        kind="class_records",
        path="u.jsonl",
        id_field="id",
        max_records=5,
        rows_per_document=2,
        metadata_fields=["label"],
    )
    docs = load_source(src, tmp_path, stats)
    # content-defined groups: about 2 rows each, never more than 4, in order, every row once
    assert "\n".join(d.text for d in docs) == "\n".join(f"第{i}句话。" for i in range(5))
    assert all(1 <= d.text.count("\n") + 1 <= 4 for d in docs) and len(docs) >= 2
    first = docs[0].text.count("\n")
    assert docs[0].doc_id == (f"u/u.jsonl#0-{first}" if first else "u/u.jsonl#0")
    assert docs[0].metadata == {"label": ",".join(dict.fromkeys(str(i % 2) for i in range(first + 1)))}
    assert stats.records == 5 and stats.capped == 2


def test_rows_without_id_field_are_named_by_their_text(tmp_path: Path):
    (tmp_path / "t.csv").write_text("text\nfirst row\nsecond row\nfirst row\n", encoding="utf-8")
    docs = load_source(SourceConfig(name="t", kind="class_records", path="t.csv"), tmp_path)
    assert [d.text for d in docs] == ["first row", "second row", "first row"]
    assert docs[0].doc_id == docs[2].doc_id != docs[1].doc_id and docs[0].doc_id.startswith("t/t.csv#h")
    (tmp_path / "t.csv").write_text("text\ninserted row\nfirst row\nsecond row\n", encoding="utf-8")
    again = load_source(SourceConfig(name="t", kind="class_records", path="t.csv"), tmp_path)
    assert [d.doc_id for d in again[1:]] == [d.doc_id for d in docs[:2]]


def test_reserved_metadata_names_are_a_config_error():
    from pydantic import ValidationError

    for name in ("doc", "position", "kind", "group", "_sparse"):
        with pytest.raises(ValidationError, match=rf"metadata field\(s\) \['{name}'\] clash with"):
            SourceConfig(name="s", kind="safety", path="s.csv", metadata_fields=["category", name])
    assert SourceConfig(name="s", kind="safety", path="s.csv", metadata_fields=["category"]).metadata_fields


def test_replace_applies_to_text(tmp_path: Path):
    write_jsonl(tmp_path / "d.jsonl", [{"q": "2+2?", "c": "Teacher: hi|EOM|Student: 4"}])
    src = SourceConfig(name="d", kind="class_records", path="d.jsonl", text_fields=["q", "c"], replace={"|EOM|": "\n"})
    assert load_source(src, tmp_path)[0].text == "2+2?\nTeacher: hi\nStudent: 4"


def test_non_utf8_file_names_file_and_byte_offset(tmp_path: Path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bad.txt").write_bytes(b"good text " + "老师".encode("gbk"))
    with pytest.raises(KBBuildError, match=r"bad\.txt: not UTF-8 \(invalid byte 0xc0 at byte offset 10\)"):
        load_source(SourceConfig(name="s", kind="psychology", path="src"), tmp_path)


def test_wrong_csv_field_missing_folder_and_bad_jsonl(tmp_path: Path):
    (tmp_path / "t.csv").write_text("question,answer\nq,a\n", encoding="utf-8")
    with pytest.raises(KBBuildError, match=r"t\.csv:2: field\(s\) \['text'\] not found \(available: \['answer', "):
        load_source(SourceConfig(name="c", kind="safety", path="t.csv"), tmp_path)
    with pytest.raises(KBBuildError, match=r"does not exist; fix build_kb\.sources\[\]\.path"):
        load_source(SourceConfig(name="m", kind="safety", path="nowhere"), tmp_path)
    (tmp_path / "b.jsonl").write_text('{"text": "ok"}\n{broken\n', encoding="utf-8")
    with pytest.raises(KBBuildError, match=r"b\.jsonl:2: not valid JSON"):
        load_source(SourceConfig(name="b", kind="safety", path="b.jsonl"), tmp_path)


def test_detect_language():
    assert detect_language("学生在课堂上提问 OK") == "zh"
    assert detect_language("A student asks 问题 in class today") == "en"
    assert detect_language("") == "en"
