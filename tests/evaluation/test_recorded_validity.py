"""The evaluation's validity checks on the recorded smoke run (tests/evaluation/recorded, a real
``dvc repro`` re-recorded by its script): identical tuned and base replies are ties that no judge
was called for, a judge with a position bias is withheld from every score while the other is kept,
seeds of one model get no kappa, and the RAM2C voter that accepts every document is flagged."""

from __future__ import annotations

import json

from pipelines.evaluation.hts.judging import normalised
from tests.evaluation.recorded import TUTORING, jsonl, metrics

DIMENSIONS = ("humanized", "teaching", "safety")


def replies(arm: str) -> dict[str, str]:
    return {row["id"]: row["reply"] for row in jsonl(TUTORING / "replies" / arm / "predictions.jsonl")}


def test_identical_recorded_replies_are_ties_without_a_judge_call():
    tuned, base = replies("tuned"), replies("base")
    identical = {key for key in tuned if normalised(tuned[key]) == normalised(base[key])}
    assert identical == set(tuned) == {"new-4", "new-6"}  # the 3-step DPO adapter did not change these replies
    folder = TUTORING / "comparisons" / "tuned_vs_base"
    judgments = jsonl(folder / "judgments.jsonl")
    assert len(judgments) == 2 * 3 * 2  # items x dimensions x judges, each an "equal" tie
    assert all(j["tie"] and j["outcome"] == "equal" and j["item_id"] in identical for j in judgments)
    assert jsonl(folder / "traces.jsonl") == []  # no judge saw them
    called = jsonl(TUTORING / "comparisons" / "tuned_vs_ref_r" / "judgments.jsonl")
    assert not any(j.get("tie") for j in called) and len(jsonl(TUTORING / "comparisons" / "tuned_vs_ref_r"
                                                               / "traces.jsonl")) == len(called)  # fmt: skip
    row = metrics("evaluate")["tutoring"]["comparisons"]["tuned_vs_base"]
    assert (row["n"], row["ties"]) == (2, 2)


def test_the_recorded_position_biased_judge_is_withheld_and_the_other_kept():
    hts = metrics("evaluate")["tutoring"]["hts"]
    for table in hts["tables"].values():
        for label, validity in table["validity"].items():
            judges = validity["judges"]
            assert judges["base-seed1"]["flagged"] and "position bias" in judges["base-seed1"]["why"], label
            assert judges["base-seed1"]["first"] == 15 and judges["base-seed1"]["p_value"] < 0.01
            assert not judges["base-seed2"]["flagged"], label
        for label, dims in table["rows"].items():
            for dimension in DIMENSIONS:
                assert dims[dimension]["withheld"] == ["base-seed1"], (label, dimension)
                assert dims[dimension]["no_valid_judge"] is False
    # the tuned-vs-base row is all ties: parity, scored without a judge call
    row = next(iter(hts["tables"]["1"]["rows"].values()))
    assert {d: (row[d]["score"], row[d]["equal"], row[d]["ties"]) for d in DIMENSIONS} == dict.fromkeys(
        DIMENSIONS, (50.0, 2, 2))


def test_recorded_seed_judges_get_no_kappa_but_self_consistency():
    hts = metrics("evaluate")["tutoring"]["hts"]
    for table in hts["tables"].values():
        assert "seeds of one model" in table["raters"] and "no kappa" in table["raters"]
        for dims in table["rows"].values():
            assert all(dims[d]["kappa"] is None for d in DIMENSIONS)


def test_the_recorded_constant_voter_is_flagged_with_its_accepted_share():
    voters = metrics("generate_ram2c")["voters"]
    assert voters["expert"]["flagged"] and voters["expert"]["constant_share"] == 1.0
    assert voters["expert"]["accepted_share"] == 1.0 and "constant" in voters["expert"]["why"]
    assert json.dumps(voters["expert"]["constant_verdict"]) == '["yes"]'
