"""The one JSON-lines reader every loader uses: blank lines skipped, bad lines named by file and line."""

from __future__ import annotations

import pytest

from pipelines.io import iter_jsonl_objects, read_jsonl


class DatasetProblem(Exception):
    pass


def test_objects_with_their_line_numbers() -> None:
    lines = ['{"a": 1}', "", "   ", '{"b": [2]}']
    assert list(iter_jsonl_objects(lines, "x.jsonl")) == [(1, {"a": 1}), (4, {"b": [2]})]


def test_bad_json_raises_the_callers_error_naming_file_and_line() -> None:
    with pytest.raises(DatasetProblem, match=r"^x\.jsonl:2: not valid JSON \(.* at column 2\); fix or remove"):
        list(iter_jsonl_objects(['{"a": 1}', '{"b'], "x.jsonl", error=DatasetProblem))


def test_a_line_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match=r"x\.jsonl:1: expected a JSON object per line, got list"):
        list(iter_jsonl_objects(["[1, 2]"], "x.jsonl"))


def test_read_jsonl_reads_a_file(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "a"}\n\n{"id": "b"}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"id": "a"}, {"id": "b"}]
    path.write_text('{"id": "a"}\n{oops\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{path.name}:2: not valid JSON"):
        read_jsonl(path)
