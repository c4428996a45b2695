"""The paper-scale projection: a run at a share of the paper's counts is extrapolated to the full
counts (work times 1/share, hours at the measured ratio), and the shares come from the params;
APIs with a batch API are also priced at the batch price beside the online one
(benchmarks/prices.yaml)."""

from __future__ import annotations

import pytest

from benchmarks.scale.projection import load_prices, project, write_projection
from tests.support.paper_workspace import TEAMS, effective_fractions, paper_items, paper_params, ran_fraction
from tests.support.simserver.engine import EngineModel

URLS = {team: ["http://127.0.0.1:9/v1"] for team in TEAMS}


def _team(*, phase_v: float, bound_v: float, wall_s: float, phase_s: float) -> dict:
    return {
        "usage": {"calls": 100, "prompt_tokens": 200_000, "completion_tokens": 50_000},
        "llm_phase_s": phase_s,
        "llm_phase_virtual_s": phase_v,
        "wall_s": wall_s,
        "wall_virtual_s": 2 * wall_s,
        "bound_virtual_s": bound_v,
        "servers": [{"prompt_tokens": 200_000, "cached_tokens": 0, "completion_tokens": 50_000}],
    }


def test_a_share_of_the_run_is_extrapolated_to_the_full_counts():
    prices = load_prices()
    teams = {"kgc": _team(phase_v=360.0, bound_v=300.0, wall_s=400.0, phase_s=180.0)}
    rows = project(teams, EngineModel(), prices, fractions={"kgc": 0.05})
    kgc = rows["kgc"]
    assert kgc["calls"] == 2000 and kgc["prompt_tokens"] == 4_000_000 and kgc["completion_tokens"] == 1_000_000
    assert kgc["ratio_used"] == pytest.approx(1.2)
    assert kgc["bound_hours"] == pytest.approx(300 * 20 / 3600)
    # the full bound at the measured ratio, plus the 220 s of the stage outside its LLM phase
    assert kgc["hours"] == pytest.approx((300 * 20 * 1.2 + 220) / 3600)
    gpt4o = next(a for a in prices.apis if a.name == "gpt-4o")
    assert kgc["usd"]["gpt-4o"] == pytest.approx(4 * gpt4o.input_per_million + 1 * gpt4o.output_per_million)
    assert kgc["measured"]["calls"] == 100
    assert rows["total"]["calls"] == 2000


def test_a_ratio_under_one_is_not_used_to_shrink_the_bound():
    rows = project({"ram2c": _team(phase_v=100.0, bound_v=200.0, wall_s=60.0, phase_s=50.0)}, EngineModel(),
                   load_prices(), fractions={"ram2c": 0.5})
    assert rows["ram2c"]["ratio_used"] == 1.0
    assert rows["ram2c"]["hours"] == pytest.approx((400 + 10) / 3600)


def test_the_table_names_the_share_each_team_ran(tmp_path):
    prices = load_prices()
    rows = project({"kgc": _team(phase_v=360.0, bound_v=300.0, wall_s=400.0, phase_s=180.0)}, EngineModel(), prices,
                   fractions={"kgc": 0.05})
    result = {"measured_on": "2 CPUs", "servers": 8, "compression": 2.0, "counts_line": "x", "command": "c",
              "projection": rows}
    text = write_projection(result, prices, tmp_path).read_text()
    assert "| kgc | 5 % | 1.20 | 2,000 | 4,000,000 | 1,000,000 |" in text
    assert "| kgc | 100 | 200,000 | 50,000 |" in text  # the measured row
    assert (tmp_path / "scale_projection.json").exists()


def test_the_shares_come_from_the_counts_the_params_ask_for():
    params = paper_params(urls=URLS, fraction=0.01, fractions={"kgc": 0.05, "tagging": 1.0})
    assert params["ram2c"]["dialogues"] == 35
    assert {d["sample"] for d in params["kgc"]["datasets"]} == {5}
    assert params["tagging"]["data"]["limit"] is None
    assert effective_fractions(params) == {"tagging": 1.0, "kgc": pytest.approx(0.05), "ram2c": pytest.approx(0.01)}
    with pytest.raises(ValueError, match="unknown teams"):
        paper_params(urls=URLS, fractions={"kcg": 0.5})


def test_a_run_that_wrote_fewer_items_than_asked_is_projected_from_what_it_wrote():
    # the paper profile asks 100 sentences of each of KGC's 6 datasets; a checkout whose datasets hold
    # fewer (the bundled demos: 5 or 6 sentences) ran 256 of the 600: the projection scales by 600/256
    assert paper_items() == {"tagging": 108, "kgc": 600, "ram2c": 3500}
    assert ran_fraction("kgc", 256, 1.0) == pytest.approx(256 / 600)
    assert ran_fraction("ram2c", 350, 0.1) == pytest.approx(0.1)
    assert ran_fraction("tagging", 200, 1.0) == 1.0  # never above the share asked for
    assert ran_fraction("kgc", 0, 0.05) == 0.05  # nothing written: the share asked for


def test_batch_prices_stand_beside_the_online_ones(tmp_path):
    prices = load_prices()
    by_name = {api.name: api for api in prices.apis}
    assert by_name["gpt-4o"].batch.share == 0.5 and by_name["gpt-4o"].batch.read
    assert by_name["glm-4 (2024 list price)"].batch is None  # no batch price is claimed for it
    server = {"prompt_tokens": 2_000_000, "cached_tokens": 0, "completion_tokens": 1_000_000}
    team = {
        "usage": {"calls": 10, "prompt_tokens": 2_000_000, "completion_tokens": 1_000_000},
        "wall_s": 1800.0,
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
