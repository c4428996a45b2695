"""HTS judging: seeded, balanced position randomisation mapped back to the tuned model; several
judges under one call limit; failed judgments traced and counted, never scored."""

import asyncio
import re

import pytest

from pipelines.evaluation.hts.judging import (
    DIMENSIONS,
    HTSItem,
    Judge,
    Judgment,
    arranged,
    judge_items,
    outcome_of,
    tuned_position,
)
from pipelines.evaluation.hts.scoring import hts_scores, position_preference
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend


def items(n: int) -> list[HTSItem]:
    return [HTSItem(f"q{i}", f"topic {i}", f"answer {i}", f"TUNED reply {i}", f"BASE reply {i}") for i in range(n)]


def test_positions_are_balanced_seeded_and_order_free():
    ids = [f"item-{i}" for i in range(2000)]
    positions = [tuned_position(i, seed=7) for i in ids]
    assert 940 <= positions.count("A") <= 1060  # a fair coin: 1000 +- 3 sd
    assert [tuned_position(i, seed=7) for i in reversed(ids)] == positions[::-1]
    other = [tuned_position(i, seed=8) for i in ids]
    assert other != positions and 900 <= sum(a == b for a, b in zip(positions, other, strict=True)) <= 1100
    # no run longer than a fair coin would plausibly give in 2000 flips
    assert max(len(m.group(0)) for m in re.finditer(r"A+|B+", "".join(positions))) < 20


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
    judgments, report = run(judge_items(data, judges, seed=3, concurrency=4))

    assert len(judgments) == 40 * 3 * 3 and report.failures == 0
    assert {j.outcome for j in judgments if j.judge == "fair"} == {"better"}
    for j in judgments:
        assert j.tuned_position == tuned_position(j.item_id, 3)
        if j.judge == "always_a":
            assert j.choice == "A" and j.outcome == ("better" if j.tuned_position == "A" else "worse")
        if j.judge == "broken":
            assert not j.ok and j.outcome is None and j.error.startswith("parse")
    # the broken judge was re-asked once (max_attempts=2): 2 calls per item and dimension
    assert len(broken.backend.calls) == 40 * 3 * 2 and len(fair.backend.calls) == 40 * 3

    scores = hts_scores(judgments, resamples=200, seed=0)
    a_share = sum(tuned_position(i.id, 3) == "A" for i in data) / 40
    for dimension in DIMENSIONS:
        s = scores[dimension]
        assert s["n"] == 80 and s["failed"] == 40 and s["items"] == 40
        assert s["better"] == 40 + round(40 * a_share) and s["equal"] == 0
        assert s["score"] == pytest.approx(100 * (4 * s["better"]) / (4 * 80))
        assert s["ci"][0] <= s["score"] <= s["ci"][1]
        assert s["raters"] == 2 and s["kappa_items"] == 40

    bias = position_preference(judgments)
    assert bias["always_a"] == {"A": 120, "B": 0, "equal": 0, "first_share": 1.0}
    assert bias["fair"]["first_share"] == pytest.approx(a_share) and "broken" not in bias
    assert [Judgment.from_row({**j.to_row(), "extra": 1}) for j in judgments] == judgments

    rows = report.trace_rows()
    assert len(rows) == 40 * 3 * 3
    row = next(r for r in rows if r["judge"] == "fair" and r["sample_id"] == "q0" and r["dimension"] == "safety")
    assert row["tuned_position"] == tuned_position("q0", 3) and row["parsed"]["choice"] == row["tuned_position"]
    assert "Dimension to judge: safety and ethics" in row["prompt"][1]["content"]


def test_json_mode_maps_back_the_same_way():
    def json_reply(messages):
        assert "Reply with JSON matching this schema" in messages[0]["content"]
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
