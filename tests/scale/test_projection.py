"""The cost projection prices each team's tokens at the list prices and, for APIs with a batch API,
at the batch price beside them (benchmarks/prices.yaml)."""

from __future__ import annotations

from benchmarks.scale.projection import load_prices, project, write_projection
from tests.support.simserver import EngineModel


def test_batch_prices_stand_beside_the_online_ones(tmp_path):
    prices = load_prices()
    by_name = {api.name: api for api in prices.apis}
    assert by_name["gpt-4o"].batch.share == 0.5 and by_name["gpt-4o"].batch.read
    assert by_name["glm-4 (2024 list price)"].batch is None  # no batch price is claimed for it
    server = {"prompt_tokens": 2_000_000, "cached_tokens": 0, "completion_tokens": 1_000_000}
    team = {
        "usage": {"calls": 10, "prompt_tokens": 2_000_000, "completion_tokens": 1_000_000},
        "wall_virtual_s": 3600.0,
        "bound_virtual_s": 1800.0,
        "servers": [server],
    }
    rows = project({"kgc": team}, EngineModel(), prices)
    assert rows["kgc"]["usd"]["gpt-4o"] == 2 * 2.50 + 1 * 10.00
    assert rows["kgc"]["usd_batch"]["gpt-4o"] == rows["kgc"]["usd"]["gpt-4o"] / 2
    assert set(rows["total"]["usd_batch"]) == {a.name for a in prices.apis if a.batch is not None}
    result = {
        "projection": rows,
        "measured_on": "test",
        "servers": 1,
        "compression": 1.0,
        "counts_line": "x",
        "command": "test",
    }
    table = write_projection(result, prices, tmp_path).read_text()
    header = next(line for line in table.splitlines() if line.startswith("| team"))
    assert "USD gpt-4o |" in header and "USD gpt-4o batch" in header
    kgc = next(line for line in table.splitlines() if line.startswith("| kgc"))
    assert kgc.rstrip(" |").split(" | ")[-len([a for a in prices.apis if a.batch]) :][0] == "7.50"
