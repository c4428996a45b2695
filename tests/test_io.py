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


def test_atomic_writes_have_the_mode_of_a_plain_write(tmp_path) -> None:
    import os
    import stat

    from pipelines.agents.sample_writer import JsonlStream
    from pipelines.io import write_json_atomic

    old = os.umask(0o022)
    try:
        with open(tmp_path / "plain.json", "w") as handle:
            handle.write("{}")
        write_json_atomic(tmp_path / "atomic.json", {})
        stream = JsonlStream(tmp_path / "rows.jsonl")
        stream.write({"a": 1})
        stream.commit()
    finally:
        os.umask(old)
    names = ("plain.json", "atomic.json", "rows.jsonl")
    modes = {name: stat.S_IMODE((tmp_path / name).stat().st_mode) for name in names}
    assert modes == {"plain.json": 0o644, "atomic.json": 0o644, "rows.jsonl": 0o644}  # mkstemp alone: 0o600


def test_stale_temporaries_go_and_a_live_writers_stay(tmp_path) -> None:
    import os

    from pipelines.io import remove_stale_temporaries

    stale, live, other = (tmp_path / n for n in (".p.jsonl.abc.tmp", ".p.jsonl.def.tmp", ".q.jsonl.abc.tmp"))
    for path in (stale, live, other):
        path.write_text("")
    os.utime(stale, (1_000_000_000, 1_000_000_000))  # written before this process started: a killed writer's
    os.utime(other, (1_000_000_000, 1_000_000_000))
    assert remove_stale_temporaries(tmp_path / "p.jsonl") == [stale]
    assert not stale.exists() and live.exists() and other.exists()  # another file's temporaries are its own
