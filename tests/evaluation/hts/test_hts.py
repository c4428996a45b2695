"""HTS judging: seeded positions balanced per comparison, judge and dimension (each judge its own
order) mapped back to the system under test; several judges under one call limit; failed judgments
traced and counted, never scored."""

import asyncio
import re

import pytest

from pipelines.evaluation.hts.judging import (
    DIMENSIONS,
    HTSItem,
    Judge,
    Judgment,
    arranged,
    assign_positions,
    balanced_positions,
    judge_items,
    outcome_of,
)
from pipelines.evaluation.hts.scoring import hts_scores, position_preference
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend


def items(n: int) -> list[HTSItem]:
    return [HTSItem(f"q{i}", f"topic {i}", f"answer {i}", f"TUNED reply {i}", f"BASE reply {i}") for i in range(n)]


def test_positions_are_balanced_seeded_and_order_free():
    ids = [f"item-{i}" for i in range(2000)]
    positions = balanced_positions(ids, seed=7, salt="tuned_vs_base:j1:humanized")
    assert list(positions.values()).count("A") == 1000  # exactly half, not a coin's 1000 +- 45
    assert balanced_positions(list(reversed(ids)), seed=7, salt="tuned_vs_base:j1:humanized") == positions
    other = balanced_positions(ids, seed=8, salt="tuned_vs_base:j1:humanized")
    assert other != positions and 900 <= sum(positions[i] == other[i] for i in ids) <= 1100
    sequence = "".join(positions[i] for i in sorted(ids))
    assert max(len(m.group(0)) for m in re.finditer(r"A+|B+", sequence)) < 20  # shuffled, not blocks
    odd = balanced_positions([f"q{i}" for i in range(7)], seed=0)
    assert sorted(list(odd.values()).count(x) for x in "AB") == [3, 4]


def test_each_comparison_judge_and_dimension_gets_its_own_balanced_order():
    data = items(10)
    judges = [Judge("j1", None), Judge("j2", None)]
    first = assign_positions(data, judges, DIMENSIONS, seed=0, comparison="tuned_vs_base")
    assert set(first) == {(j, d) for j in ("j1", "j2") for d in DIMENSIONS}
    for positions in first.values():
        assert list(positions.values()).count("A") == 5 and set(positions) == {i.id for i in data}
    orders = {tuple(p.values()) for p in first.values()}
    assert len(orders) == 6  # every judge and dimension its own order
    # a shared bias ("always A") cannot give agreement: the judges' outcomes differ where their orders do
    j1, j2 = first[("j1", "humanized")], first[("j2", "humanized")]
    assert sum(j1[i] != j2[i] for i in j1) > 0
    again = assign_positions(data, judges, DIMENSIONS, seed=0, comparison="tuned_vs_base")
    assert again == first
    assert assign_positions(data, judges, DIMENSIONS, seed=0, comparison="glm_vs_glm_r") != first


def test_outcome_mapping_and_arrangement():
    assert outcome_of("A", "A") == "better" and outcome_of("B", "A") == "worse"
    assert outcome_of("B", "B") == "better" and outcome_of("A", "B") == "worse"
    assert outcome_of("equal", "B") == "equal"
    with pytest.raises(ValueError):
        outcome_of("C", "A")
    item = items(1)[0]
    assert arranged(item, "A") == ("TUNED reply 0", "BASE reply 0")
    assert arranged(item, "B") == ("BASE reply 0", "TUNED reply 0")


def prefers_tuned(messages):
    user = messages[-1]["content"]
    reply_a = user.split("Reply A:\n")[1].split("\n\nReply B:")[0]
    return "Picks the tuned one.\nVerdict: " + ("A" if reply_a.startswith("TUNED") else "B")


def run(coro):
    return asyncio.run(coro)


def test_judges_map_back_to_the_tuned_reply_and_score():
    fair = LLM(ScriptedBackend([(r"Dimension to judge", prefers_tuned)], identity="fair"))
    always_a = LLM(ScriptedBackend([(r"Dimension to judge", "Verdict: A")], identity="always-a"))
    broken = LLM(ScriptedBackend([(r"Dimension to judge", "no idea")], identity="broken"))
    data = items(40)
    judges = [Judge("fair", fair), Judge("always_a", always_a), Judge("broken", broken)]
    judgments, report = run(judge_items(data, judges, seed=3, concurrency=4, comparison="c"))

    assert len(judgments) == 40 * 3 * 3 and report.failures == 0
    assert {j.outcome for j in judgments if j.judge == "fair"} == {"better"}
    positions = assign_positions(data, judges, DIMENSIONS, seed=3, comparison="c")
    for j in judgments:
        assert j.system_position == positions[(j.judge, j.dimension)][j.item_id]
        if j.judge == "always_a":
            assert j.choice == "A" and j.outcome == ("better" if j.system_position == "A" else "worse")
        if j.judge == "broken":
            assert not j.ok and j.outcome is None and j.error.startswith("parse")
    # the broken judge was re-asked once (max_attempts=2): 2 calls per item and dimension
    assert len(broken.backend.calls) == 40 * 3 * 2 and len(fair.backend.calls) == 40 * 3

    scores = hts_scores(judgments, resamples=200, seed=0)
    for dimension in DIMENSIONS:
        s = scores[dimension]
        assert s["n"] == 80 and s["failed"] == 40 and s["items"] == 40
        assert s["better"] == 40 + 20 and s["equal"] == 0  # always_a: right on exactly the half shown first
        assert s["score"] == pytest.approx(100 * (4 * s["better"]) / (4 * 80))
        assert s["ci"][0] <= s["score"] <= s["ci"][1]
        assert s["raters"] == 2 and s["kappa_items"] == 40

    bias = position_preference(judgments)
    assert bias["always_a"] == {"A": 120, "B": 0, "equal": 0, "first_share": 1.0, "flagged": True}
    assert bias["fair"]["first_share"] == 0.5 and not bias["fair"]["flagged"] and "broken" not in bias
    assert [Judgment.from_row({**j.to_row(), "extra": 1}) for j in judgments] == judgments

    rows = report.trace_rows()
    assert len(rows) == 40 * 3 * 3
    row = next(r for r in rows if r["judge"] == "fair" and r["sample_id"] == "q0" and r["dimension"] == "safety")
    assert row["system_position"] == positions[("fair", "safety")]["q0"]
    assert row["parsed"]["choice"] == row["system_position"]
    assert "Dimension to judge: safety and ethics" in row["prompt"][1]["content"]


def test_json_mode_maps_back_the_same_way():
    def json_reply(messages):
        assert "Reply with one JSON object and nothing else" in messages[0]["content"]
        user = messages[-1]["content"]
        tuned_first = user.split("Reply A:\n")[1].startswith("TUNED")
        return '{"reasoning": "warmer", "verdict": "%s"}' % ("A" if tuned_first else "B")

    llm = LLM(ScriptedBackend([(r"Dimension to judge", json_reply)]))
    judgments, report = run(judge_items(items(6), [Judge("j", llm)], mode="json", dimensions=["humanized"]))
    assert [j.outcome for j in judgments] == ["better"] * 6
    assert {r["mode"] for r in report.trace_rows()} == {"json"}
    assert all(r["tag"] == "hts:j" for r in report.trace_rows())


def test_two_judges_on_one_model_do_not_share_cache_entries(tmp_path):
    from pipelines.llm.cache import RequestCache

    cache = RequestCache(tmp_path / "cache.sqlite")
    llm = LLM(ScriptedBackend([(r"Dimension", "Verdict: equal")]), cache=cache)
    judgments, _ = run(judge_items(items(3), [Judge("s1", llm), Judge("s2", llm)], dimensions=["teaching"]))
    assert [j.outcome for j in judgments] == ["equal"] * 6
    assert len(llm.backend.calls) == 6  # no judge got the other's cached reply
    again, _ = run(judge_items(items(3), [Judge("s1", llm), Judge("s2", llm)], dimensions=["teaching"]))
    assert len(llm.backend.calls) == 6 and [j.outcome for j in again] == ["equal"] * 6


def test_bad_configuration_is_refused():
    llm = LLM(ScriptedBackend([(r".", "Verdict: A")]))
    with pytest.raises(ValueError, match="unknown HTS dimension"):
        run(judge_items(items(1), [Judge("j", llm)], dimensions=["humour"]))
    with pytest.raises(ValueError, match="distinct names"):
        run(judge_items(items(1), [Judge("j", llm), Judge("j", llm)]))
