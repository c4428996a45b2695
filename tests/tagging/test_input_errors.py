"""Every unreadable tagging input (and a request cache path that cannot be a file) ends the stage with
one ``error:`` line naming the file (and line) and the fix, exit code 1, no traceback."""

import json
from pathlib import Path

import pytest

from pipelines.io import read_jsonl
from pipelines.stage import run_stage
from stages.generate_tagging import main
from tests.tagging.test_stage import ROOT, write_params

GOOD = {"id": "a", "knowledge_id": "k", "definition": "Add within 10", "question": "1 + 2 = ?", "label": 1}


def _run_with_data(tmp_path: Path, monkeypatch, capsys, data: Path) -> str:
    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path)
    params.write_text(params.read_text().replace(str(ROOT / "data/tagging/demo.jsonl"), str(data)))
    assert main(["--params", str(params)]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("error: ")
    return last


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (json.dumps(GOOD) + "\n{not json\n", "bad.jsonl:2: not valid JSON (Expecting property name"),
        (json.dumps(GOOD) + "\n[1, 2]\n", "bad.jsonl:2: expected a JSON object per line, got list"),
        ('{"definition": "x", "label": 1}\n', "bad.jsonl:1: no column 'question'; fix tagging.data.fields"),
        (b'{"definition": "caf\xe9"}\n', "bad.jsonl:1: not UTF-8 (invalid byte 0xe9 at byte offset 19); save"),
    ],
)
def test_unreadable_rows_are_one_line_errors(tmp_path, monkeypatch, capsys, content, expected):
    data = tmp_path / "bad.jsonl"
    data.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert expected in _run_with_data(tmp_path, monkeypatch, capsys, data)


def test_a_folder_as_data_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    (tmp_path / "pairs").mkdir()
    last = _run_with_data(tmp_path, monkeypatch, capsys, tmp_path / "pairs")
    assert last.endswith("pairs: is a folder, not a file; set tagging.data.path to a .jsonl or .csv file")


def test_a_csv_row_names_its_line(tmp_path, monkeypatch, capsys):
    data = tmp_path / "bad.csv"
    data.write_text("definition,label\nAdd within 10,1\n")
    assert "bad.csv:2: no column 'question'" in _run_with_data(tmp_path, monkeypatch, capsys, data)


@pytest.mark.parametrize(("cache", "expected"), [("cachedir", "is a folder; set llm.cache"), ("afile/llm.sqlite",
                                                 "a part of its folder is a file, not a folder; set llm.cache")])
def test_an_unusable_cache_path_is_a_one_line_error(tmp_path, monkeypatch, capsys, cache, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cachedir").mkdir()
    (tmp_path / "afile").write_text("x")
    params = write_params(tmp_path)
    params.write_text(params.read_text().replace("cache: cache/llm.sqlite", f"cache: {cache}"))
    assert main(["--params", str(params)]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and expected in err.splitlines()[-1]


def test_read_jsonl_errors_reach_the_stage_as_one_line(tmp_path, capsys):
    """make_datasets (and every reader through pipelines.io.read_jsonl) on a malformed row."""
    bad = tmp_path / "sft.jsonl"
    bad.write_text('{"messages": []}\n{"messages": [}\n')
    assert run_stage(lambda: len(read_jsonl(bad)), []) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bad}:2: not valid JSON (Expecting value at column 15); fix or remove the line"
    assert run_stage(lambda: len(read_jsonl(tmp_path)), []) == 1
    assert capsys.readouterr().err.strip() == f"error: {tmp_path}: is a folder, not a file; point params.yaml at a " \
        "JSON-lines file"
