"""The build's memory stays flat: four times the chunks add only their ids to the Python heap, not
their vectors and texts (issue 13 item 22). Runs the benchmark's memory mode: one fresh process per
size, so one-time costs (imports, Chroma's client) weigh the same in both."""

import importlib.util
from pathlib import Path

import pytest

from tests.retrieval.conftest import PROJECT


@pytest.mark.slow
def test_python_heap_peak_does_not_grow_with_the_vectors(tmp_path: Path):
    spec = importlib.util.spec_from_file_location("kb_scale", PROJECT / "benchmarks" / "kb_scale.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.main(["--sizes", "1000,4000", "--dim", "1024", "--out", str(tmp_path / "kb_scale.json")])
    small, large = result["builds"]
    assert (small["chunks"], large["chunks"]) == (1000, 4000)
    # holding them would add 3000 x (4 KB vector + text + metadata): about 14 MB (measured before the fix)
    assert large["peak_python_heap_mb"] - small["peak_python_heap_mb"] < 4.0, result
    assert large["python_heap_mb_per_100k"] < small["python_heap_mb_per_100k"] / 2
    assert (tmp_path / "kb_memory.json").is_file()
