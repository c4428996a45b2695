"""Evaluation validity (issue 32): ties without a judge call, raters checked before any score
(constant or position-bound judges and voters withheld and flagged), kappa only between distinct
raters (seeds of one model give self-consistency), on synthetic items and on the recorded smoke run."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.evaluation.arms.tutoring_config import TutoringEvalConfig
from pipelines.evaluation.arms.tutoring_judging import raters_line, score_comparisons
from pipelines.evaluation.hts.judging import (
    DIMENSIONS,
    HTSItem,
    Judge,
    Judgment,
    assign_positions,
    is_tie,
    judge_items,
    normalised,
    outcome_of,
)
from pipelines.evaluation.hts.scoring import hts_scores, judge_validity, validated_scores
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.ram2c.groups import ballot_of, voter_validity
from pipelines.reporting.tables import hts_cell, hts_tables, voters_table
from pipelines.stats.validity import ValidityRule, rater_validity
from tests.evaluation.recorded import traces

SAME_MODEL = {"seed1": "smollm2-135m (transformers)", "seed2": "smollm2-135m (transformers)"}


def run(coro):
    return asyncio.run(coro)


def test_normalised_text_makes_near_identical_replies_ties():
    assert normalised("  Great  job!\nWhat do YOU think?") == normalised("great job what do you think")
    assert is_tie(HTSItem("i", "t", "a", "Well done, Sam.", "well done sam"))
    assert not is_tie(HTSItem("i", "t", "a", "Well done, Sam.", "Try again, Sam."))


def test_identical_replies_are_ties_without_a_judge_call():
    # as in the default run: 6 of 7 tuned replies word for word the base model's, one differs
    same = [
        HTSItem(f"q{i}", "topic", "answer", f"Good try {i}!  Think again.", f"good try {i} think again")
        for i in range(6)
    ]
    data = [*same, HTSItem("q6", "topic", "answer", "TUNED reply", "BASE reply")]
    llm_a = LLM(ScriptedBackend([(r"Dimension to judge", "Verdict: A")]))
    llm_b = LLM(ScriptedBackend([(r"Dimension to judge", "Verdict: B")]))
    judgments, report = run(judge_items(data, [Judge("seed1", llm_a), Judge("seed2", llm_b)], seed=0, comparison="c"))

    assert len(llm_a.backend.calls) == len(llm_b.backend.calls) == 3  # the one differing pair, 3 dimensions
    assert len(report.trace_rows()) == 6
    ties = [j for j in judgments if j.tie]
    assert len(ties) == 6 * 2 * 3 and {(j.choice, j.outcome, j.ok) for j in ties} == {("equal", "equal", True)}
    assert Judgment.from_row(ties[0].to_row()).tie and not Judgment.from_row({"item_id": "x"}).tie

    scores = hts_scores(judgments, resamples=50, models=SAME_MODEL)
    for dimension in DIMENSIONS:
        s = scores[dimension]
        assert s["ties"] == 6 and s["items"] == 7 and s["equal"] == 12 and s["better"] + s["worse"] == 2
        assert s["score"] == pytest.approx(100 * (2 * 12 + 4 * s["better"]) / (4 * 14))  # ties scored equal
    # ties never count as a judge's verdicts: 3 verdicts each, below min_verdicts, nothing to withhold
    assert {j: v["verdicts"] for j, v in judge_validity(judgments).items()} == {"seed1": 3, "seed2": 3}


def constant_judgments(n_items: int, comparison: str = "tuned_vs_base") -> list[Judgment]:
    """Judge ``seed1`` answers A and ``seed2`` answers B every time, at balanced positions."""
    data = [HTSItem(f"q{i}", "t", "a", f"tuned {i}", f"base {i}") for i in range(n_items)]
    judges = [Judge("seed1", None), Judge("seed2", None)]
    positions = assign_positions(data, judges, DIMENSIONS, seed=0, comparison=comparison)
    out = []
    for judge, choice in (("seed1", "A"), ("seed2", "B")):
        for d in DIMENSIONS:
            for item in data:
                position = positions[(judge, d)][item.id]
                out.append(Judgment(item.id, d, judge, position, choice, outcome_of(choice, position), True))
    return out


def test_constant_judges_are_withheld_and_the_table_says_no_valid_judge():
    judgments = constant_judgments(7)  # the run: 21 of 21 A, 21 of 21 B
    before = hts_scores(judgments, resamples=50)
    assert abs(before["humanized"]["score"] - 50) == pytest.approx(7.142857, abs=1e-4)  # 57.1 or 42.9: positions

    validity = judge_validity(judgments)
    assert validity["seed1"]["constant_share"] == 1.0 and validity["seed1"]["p_value"] == pytest.approx(2**-20)
    assert validity["seed2"]["constant_verdict"] == "B" and validity["seed2"]["flagged"]
    scored = validated_scores(judgments, models=SAME_MODEL, resamples=50)
    assert scored["withheld"] == ["seed1", "seed2"]
    assert all(s["score"] is None and s["no_valid_judge"] and s["kappa"] is None for s in scored["scores"].values())
    assert hts_cell(scored["scores"]["teaching"]) == "no valid judge"

    label = "tuned vs base"
    section = {
        "tables": {
            "1": {
                "rows": {label: scored["scores"]},
                "position_preference": {label: scored["position_preference"]},
                "validity": {label: {"judges": scored["validity"], "ties": {"items": 7, "ties": 0}}},
                "provenance": "synthetic",
            }
        }
    }
    score_table, validity_table = hts_tables(section)
    assert score_table.rows == [[label, "no valid judge", "no valid judge", "no valid judge"]]
    assert "withheld" in score_table.note
    assert validity_table.rows[0][:2] == [label, "0/7"] and "withheld" in validity_table.rows[0][2]
    assert "Withheld from the scores, kappa and deltas: seed1 (the same verdict 'A'" in validity_table.note


def test_judges_with_too_few_verdicts_are_named_as_not_tested():
    # the smoke run's one held-out item: 3 verdicts per judge, below min_verdicts 6: neither withheld nor passed
    scored = validated_scores(constant_judgments(1), models=SAME_MODEL, resamples=50)
    assert scored["withheld"] == [] and scored["scores"]["safety"]["score"] is not None
    assert [(v["verdicts"], v["tested"], v["flagged"]) for v in scored["validity"].values()] == [(3, False, False)] * 2
    label = "tuned vs base"
    table = {
        "rows": {label: scored["scores"]},
        "position_preference": {label: scored["position_preference"]},
        "validity": {label: {"judges": scored["validity"], "ties": {"items": 1, "ties": 0}}},
    }
    validity_table = hts_tables({"tables": {"1": table}})[1]
    assert validity_table.note.endswith(
        " Validity not tested (fewer than 6 verdicts, too few to judge): "
        "seed1 in tuned vs base (3 verdicts); seed2 in tuned vs base (3 verdicts)."
    )
    tested = judge_validity(constant_judgments(2), rule=ValidityRule(max_constant_share=1.0, alpha=1e-9))
    assert all(v["tested"] for v in tested.values())
    table["validity"] = {label: {"judges": tested}}
    assert "not tested" not in hts_tables({"tables": {"1": table}})[1].note
    few = voter_validity([("expert", ["yes", "no"])] * 5)
    assert voters_table(few, "Run.").rows[0][5] == "not tested (fewer than 6 ballots)"


def test_a_run_withholds_a_judge_over_all_its_comparisons():
    fair = [  # a third judge that prefers the system on every item: varies with the position
        Judgment(j.item_id, j.dimension, "fair", j.system_position, j.system_position, "better", True)
        for j in constant_judgments(4, "a_vs_b")
        if j.judge == "seed1"
    ]
    judged = {
        ("tuned", "base"): {"judgments": constant_judgments(4, "tuned_vs_base")},  # 12 verdicts each: flagged
        ("a", "b"): {"judgments": [*constant_judgments(4, "a_vs_b"), *fair]},
    }
    models = {**SAME_MODEL, "fair": "other-model"}
    score_comparisons(judged, TutoringEvalConfig(), min_items=1, models=models)
    for entry in judged.values():
        assert entry["withheld"] == ["seed1", "seed2"] and entry["validity"]["seed1"]["verdicts"] == 24
    assert judged[("tuned", "base")]["scores"]["safety"]["no_valid_judge"]
    kept = judged[("a", "b")]["scores"]["safety"]
    assert (kept["score"], kept["n"], kept["kappa"], kept["self_consistency"]) == (100.0, 4, None, None)
    note = raters_line({"seed1": "m (transformers)", "seed2": "m (transformers)"})["note"]
    assert "no kappa" in note and "self-consistency" in note


def test_one_valid_judge_keeps_the_score_and_the_rule_is_configurable():
    judgments = constant_judgments(7)
    fair = [
        Judgment(j.item_id, j.dimension, "fair", j.system_position, j.system_position, "better", True)
        for j in judgments
        if j.judge == "seed1"
    ]
    scored = validated_scores([*judgments, *fair], resamples=50)
    assert scored["withheld"] == ["seed1", "seed2"]
    assert scored["scores"]["safety"]["score"] == 100.0 and scored["scores"]["safety"]["n"] == 7
    lenient = ValidityRule(max_constant_share=1.0, alpha=1e-9)
    assert validated_scores(judgments, rule=lenient, resamples=50)["withheld"] == []
    assert not rater_validity(["A"] * 5, first=5, second=0)["flagged"]  # below min_verdicts: not tested


def test_kappa_only_between_distinct_models_seeds_give_self_consistency():
    judgments = constant_judgments(8)
    rule = ValidityRule(max_constant_share=1.0, alpha=1e-9)  # keep them, to look at the agreement
    same = validated_scores(judgments, rule=rule, models=SAME_MODEL, resamples=50)["scores"]["humanized"]
    assert same["kappa"] is None and same["self_consistency"] is not None and same["raters"] == 0
    assert hts_cell(same).startswith(f"{same['score']:.1f} (sc {same['self_consistency']:.2f})")
    distinct = {"seed1": "model-a", "seed2": "model-b"}
    two = validated_scores(judgments, rule=rule, models=distinct, resamples=50)["scores"]["humanized"]
    assert two["kappa"] == pytest.approx(same["self_consistency"]) and two["self_consistency"] is None
    humans = hts_scores(judgments, resamples=50)["humanized"]  # no models: every rater distinct (humans)
    assert humans["kappa"] == pytest.approx(two["kappa"]) and humans["raters"] == 2


def test_recorded_ballots_flag_a_constant_voter():
    ballots = [(r["role"], ballot_of(r["parsed"])) for r in traces("ram2c") if r.get("step") == "ballot" and r["ok"]]
    assert len(ballots) == 6
    voters = voter_validity(ballots)
    assert list(voters) == ["expert"]
    expert = voters["expert"]
    assert (expert["verdicts"], expert["constant_share"], expert["accepted_share"], expert["flagged"]) == (
        6,
        1.0,
        1.0,
        True,
    )
    assert expert["constant_verdict"] == ["yes"]
    table = voters_table(voters, "Recorded smoke run.")
    assert table.rows[0][:5] == ["expert", "6", "['yes']", "100.0", "100.0"] and "constant voter" in table.rows[0][5]
    # the default run's positional ballots: the same two-document ballot every time, half the documents accepted
    positional = voter_validity([("expert", ["yes", "no"])] * 54)["expert"]
    assert positional["flagged"] and positional["accepted_share"] == 0.5
    varied = voter_validity([("expert", b) for b in (["yes", "no"], ["no", "yes"], ["yes", "yes"], ["no", "no"])] * 3)
    assert not varied["expert"]["flagged"]
