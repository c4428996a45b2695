"""HTS arithmetic (4/2/0, 50 = parity) and Fleiss' kappa against a hand-worked case and statsmodels."""

from dataclasses import dataclass

import pytest
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from pipelines.evaluation.hts.scoring import hts_score, hts_scores
from pipelines.stats.agreement import fleiss_kappa_of, kappa_by_dimension


@dataclass
class J:
    item_id: str
    dimension: str
    judge: str
    outcome: str | None


def test_score_arithmetic_on_the_papers_scale():
    assert hts_score(["equal"] * 25) == 50.0  # parity
    assert hts_score(["better"] * 25) == 100.0 and hts_score(["worse"] * 25) == 0.0
    # 25 items: 10 better, 10 equal, 5 worse -> (40 + 20 + 0) / 100 points = 60
    assert hts_score(["better"] * 10 + ["equal"] * 10 + ["worse"] * 5) == 60.0
    assert hts_score(["better", None, "worse"]) == 50.0  # unscored ones skipped
    assert hts_score([None]) is None and hts_score([]) is None
    with pytest.raises(ValueError, match="unknown outcomes"):
        hts_score(["good"])


HAND = [  # 4 items x 3 raters
    ["better", "better", "better"],
    ["better", "better", "equal"],
    ["equal", "equal", "worse"],
    ["worse", "worse", "worse"],
]


def test_fleiss_kappa_hand_worked():
    # P_i = (sum n_ij^2 - 3) / (3 * 2): 1, 1/3, 1/3, 1 -> P_bar = 2/3
    # p_j = 5/12, 3/12, 4/12 -> P_e = (25 + 9 + 16) / 144 = 25/72
    # kappa = (2/3 - 25/72) / (1 - 25/72) = 23/47
    assert fleiss_kappa_of(HAND) == pytest.approx(23 / 47, abs=1e-12)
    codes = [[("better", "equal", "worse").index(x) for x in row] for row in HAND]
    table, _ = aggregate_raters(codes, n_cat=3)
    assert fleiss_kappa_of(HAND) == pytest.approx(fleiss_kappa(table))


def test_fleiss_kappa_edge_cases():
    assert fleiss_kappa_of([["better", "better"], ["better", "better"]]) is None  # all one category
    assert fleiss_kappa_of([["better", "worse"]]) is None  # one item
    assert fleiss_kappa_of([["better"], ["worse"]]) is None  # one rater
    assert fleiss_kappa_of([["better", "worse"], ["worse", "better"]]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa_of([["better", "worse"], ["worse"]])
    with pytest.raises(ValueError, match="unknown categories"):
        fleiss_kappa_of([["good", "bad"], ["bad", "bad"]])


def judgments_from(rows, dimension="humanized"):
    return [J(f"i{i}", dimension, f"r{r}", o) for i, row in enumerate(rows) for r, o in enumerate(row)]


def test_kappa_per_dimension_and_incomplete_items():
    data = judgments_from(HAND) + judgments_from([["equal", "equal"], ["better", "worse"]], "safety")
    data.append(J("i4", "humanized", "r0", "better"))  # rated by one rater only: left out
    data.append(J("i0", "safety", "r2", None))  # unscored: not a rating
    result = kappa_by_dimension(data)
    assert result["humanized"] == {"kappa": pytest.approx(23 / 47), "items": 4, "raters": 3, "items_left_out": 1}
    assert result["safety"]["kappa"] == pytest.approx(fleiss_kappa_of([["equal", "equal"], ["better", "worse"]]))


def test_hts_scores_summary():
    data = judgments_from(HAND) + [J("i0", "humanized", "r3", None)]
    s = hts_scores(data, resamples=300, seed=1)["humanized"]
    # points: 3*4 + (2*4 + 2) + (2*2 + 0) + 0 = 26 of 12 * 4 = 48 -> 54.1666...
    assert s["score"] == pytest.approx(100 * 26 / 48)
    assert (s["n"], s["items"], s["failed"], s["better"], s["equal"], s["worse"]) == (12, 4, 1, 5, 3, 4)
    assert s["kappa"] == pytest.approx(23 / 47) and s["raters"] == 3
    assert 0 <= s["ci"][0] <= s["score"] <= s["ci"][1] <= 100
    assert hts_scores(data, resamples=300, seed=1)["humanized"]["ci"] == s["ci"]  # seeded
