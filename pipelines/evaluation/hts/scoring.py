"""HTS scores on the RAM2C paper's scale: better / equal / worse = 4 / 2 / 0 points, summed
over a dimension's judgments and normalised to 0-100, so 50 means parity with the baseline,
above 50 the system under test is preferred and below 50 the baseline is.

``hts_scores`` is the one summary the LLM judges and the imported human ratings share: per
dimension the score, its outcome counts, unscored (failed) judgments, a bootstrap interval
over items (none for fewer than ``min_items`` items: ``"ci_note": "n too small"``) and Fleiss'
kappa over the judges. ``position_preference`` is each judge's share of first-position picks,
flagged above ``POSITION_FLAG`` (one position for more than 80% of its decisions).

Validity comes first (:func:`judge_validity`, the shared detector of
:mod:`pipelines.stats.validity`): a judge whose verdicts are constant or position-bound
is ``withheld`` from the score, the kappa and the deltas; with every judge withheld there is no
score (``"no_valid_judge": True``). Ties (identical replies, never shown to a judge) count as
``equal`` for every judge kept, and are left out of the kappa and of the validity test. Kappa is
between distinct raters only: given the judges' ``models``, one judge per model; judges that are
seeds of one model give ``self_consistency`` instead, never ``kappa``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipelines.stats.agreement import kappa_by_dimension
from pipelines.stats.bootstrap import TOO_FEW, bootstrap_interval
from pipelines.stats.validity import ValidityRule, rater_validity

POINTS = {"better": 4, "equal": 2, "worse": 0}
POSITION_FLAG = 0.8
"""A judge that picked one position (first or second) for more than this share of its A/B decisions is flagged."""


NO_VALID_JUDGE: dict[str, Any] = {
    "score": None, "n": 0, "items": 0, "failed": 0, "better": 0, "equal": 0, "worse": 0, "ties": 0,
    "ci": None, "ci_note": None, "kappa": None, "kappa_items": 0, "raters": 0, "self_consistency": None,
    "withheld": [], "no_valid_judge": True,
}  # fmt: skip
"""A dimension's summary when every judge was withheld (the tables print "no valid judge")."""


def hts_score(outcomes: Iterable[str | None]) -> float | None:
    """``100 * points / (4 * n)`` over the scored outcomes (None ones skipped); None if there are none."""
    scored = [o for o in outcomes if o is not None]
    unknown = set(scored) - set(POINTS)
    if unknown:
        raise ValueError(f"unknown outcomes {sorted(unknown)}; expected better, equal or worse")
    if not scored:
        return None
    return 100.0 * sum(POINTS[o] for o in scored) / (4 * len(scored))


def _items_score(items: Sequence[list[str]]) -> float:
    score = hts_score(o for outcomes in items for o in outcomes)
    return 50.0 if score is None else score


def hts_scores(
    judgments: Iterable[Any],
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    min_items: int = 1,
    withheld: Iterable[str] = (),
    models: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per dimension: ``{"score", "n", "items", "failed", "better", "equal", "worse", "ties", "ci",
    "ci_note", "kappa", "kappa_items", "raters", "self_consistency", "withheld", "no_valid_judge"}``.

    ``judgments`` have ``item_id``, ``dimension``, ``judge`` and ``outcome`` (None = unscored)
    and optionally ``tie``; the judges in ``withheld`` are left out (see the module docstring);
    the interval resamples items, each with all its judges' outcomes (seeded); with fewer than
    ``min_items`` scored items there is none (``ci`` None, ``ci_note`` "n too small").
    ``models`` (``{judge: model}``): kappa between distinct models only (None: every judge is a
    distinct rater, as human raters are).
    """
    judgments = list(judgments)
    withheld = sorted(set(withheld))
    dimensions = list(dict.fromkeys(j.dimension for j in judgments))
    judgments = [j for j in judgments if j.judge not in withheld]
    ties: dict[str, set[str]] = defaultdict(set)
    for j in judgments:
        if getattr(j, "tie", False):
            ties[j.dimension].add(j.item_id)
    by_dimension: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    failed: dict[str, int] = defaultdict(int)
    for j in judgments:
        if j.outcome is None:
            failed[j.dimension] += 1
            by_dimension[j.dimension]  # the dimension exists even if nothing was scored
        else:
            by_dimension[j.dimension][j.item_id].append(j.outcome)
    kappas, consistency = rater_agreement(judgments, models)
    summary: dict[str, dict[str, Any]] = {}
    for dimension, by_item in by_dimension.items():
        outcomes = [o for values in by_item.values() for o in values]
        items = list(by_item.values())
        enough = bool(items) and len(items) >= min_items
        ci = (
            bootstrap_interval(items, _items_score, resamples=resamples, seed=seed, confidence=confidence)
            if enough
            else None
        )
        agreement = kappas.get(dimension, {})
        summary[dimension] = {
            "score": hts_score(outcomes),
            "n": len(outcomes),
            "items": len(items),
            "failed": failed[dimension],
            **{name: outcomes.count(name) for name in POINTS},
            "ci": ci,
            "ci_note": None if enough or not items else TOO_FEW,
            "kappa": agreement.get("kappa"),
            "kappa_items": agreement.get("items", 0),
            "raters": agreement.get("raters", 0),
            "self_consistency": consistency.get(dimension, {}).get("kappa"),
            "ties": len(ties[dimension]),
            "withheld": withheld,
            "no_valid_judge": False,
        }
    for dimension in dimensions:
        if dimension not in summary:  # every judge of it withheld
            summary[dimension] = {**NO_VALID_JUDGE, "withheld": withheld, "failed": failed[dimension]}
    return summary


def rater_agreement(
    judgments: Sequence[Any], models: Mapping[str, str] | None
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(kappa, self-consistency)`` by dimension over the judged (non-tie) verdicts: kappa between
    distinct raters (one judge per model when ``models`` are given), self-consistency between the
    judges that share the first model with more than one judge (seeds of one model)."""
    rated = [j for j in judgments if not getattr(j, "tie", False)]
    if models is None:
        return kappa_by_dimension(rated), {}
    judges = list(dict.fromkeys(j.judge for j in rated))
    by_model: dict[str, list[str]] = defaultdict(list)
    for judge in judges:
        by_model[models.get(judge, judge)].append(judge)
    firsts = {names[0] for names in by_model.values()}
    kappa = kappa_by_dimension(j for j in rated if j.judge in firsts) if len(by_model) > 1 else {}
    seeds = next((set(names) for names in by_model.values() if len(names) > 1), set())
    return kappa, kappa_by_dimension(j for j in rated if j.judge in seeds)


def judge_validity(judgments: Iterable[Any], rule: ValidityRule | None = None) -> dict[str, dict[str, Any]]:
    """Per judge: :func:`rater_validity` of its parsed verdicts (``A`` / ``B`` / ``equal``) on the
    pairs it was shown (ties left out), with its first / second position picks."""
    verdicts: dict[str, list[str]] = defaultdict(list)
    for j in judgments:
        verdicts[j.judge]  # every judge gets a row
        if j.choice in ("A", "B", "equal") and not getattr(j, "tie", False):
            verdicts[j.judge].append(j.choice)
    return {
        judge: rater_validity(v, first=v.count("A"), second=v.count("B"), rule=rule) for judge, v in verdicts.items()
    }


def position_preference(judgments: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per judge: how often it chose the reply shown first (``A``), second (``B``) or ``equal``,
    ``first_share`` = A / (A + B) and ``flagged`` (one position in more than ``POSITION_FLAG`` of
    its A/B decisions). Positions are balanced, so a fair judge's share is near 0.5 whatever the
    systems; a share near 0 or 1 is position bias, not preference."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"A": 0, "B": 0, "equal": 0})
    for j in judgments:
        if j.choice in ("A", "B", "equal"):
            counts[j.judge][j.choice] += 1
    out = {}
    for judge, c in counts.items():
        share = c["A"] / (c["A"] + c["B"]) if c["A"] + c["B"] else None
        flagged = share is not None and max(share, 1 - share) > POSITION_FLAG
        out[judge] = {**c, "first_share": share, "flagged": flagged}
    return out


def validated_scores(
    judgments: Sequence[Any],
    *,
    rule: ValidityRule | None = None,
    models: Mapping[str, str] | None = None,
    **scoring: Any,
) -> dict[str, Any]:
    """Validity first, then the scores of the valid judges: ``{"validity": judge_validity(...),
    "withheld": [flagged judges], "scores": hts_scores(..., withheld=...), "position_preference"}``;
    ``scoring``: ``resamples``, ``seed``, ``confidence``, ``min_items`` of :func:`hts_scores`."""
    validity = judge_validity(judgments, rule)
    withheld = [judge for judge, v in validity.items() if v["flagged"]]
    return {
        "validity": validity,
        "withheld": withheld,
        "scores": hts_scores(judgments, withheld=withheld, models=models, **scoring),
        "position_preference": position_preference(judgments),
    }
