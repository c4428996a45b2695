"""Rater validity, measured before any score: is a rater (an HTS judge, a RAM2C voter role) answering
the content, or giving one answer whatever it is shown?

Two measures per rater, over its parsed verdicts:

- ``constant_share``: the share of its verdicts equal to its most common verdict (``A`` every time,
  or the same ballot ``{"1": "yes", "2": "no"}`` for every set of documents);
- a two-sided binomial test (scipy) of its first- vs second-position picks against 1/2: positions
  are balanced, so a rater that judges content picks the first one about half the time.

A rater with at least ``min_verdicts`` verdicts is **invalid** when its constant share is above
``max_constant_share`` or the position test's p-value is below ``alpha``; its verdicts are then
withheld from every score and agreement figure and reported apart, with why (:func:`rater_validity`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any

from pydantic import Field
from scipy.stats import binomtest

from pipelines.config import StrictModel


class ValidityRule(StrictModel):
    """When a rater is withheld (see the module docstring)."""

    max_constant_share: float = Field(
        0.9, gt=0.0, le=1.0,
        description="a rater whose most common verdict is above this share of its verdicts is invalid",
    )
    alpha: float = Field(
        0.01, gt=0.0, lt=1.0,
        description="a rater whose first- vs second-position picks give a binomial p-value below this is invalid",
    )
    min_verdicts: int = Field(6, ge=1, description="raters with fewer verdicts are not tested")


def position_p_value(first: int, second: int) -> float | None:
    """Two-sided binomial p-value of ``first`` first-position picks out of ``first + second`` against 1/2."""
    if first + second == 0:
        return None
    return float(binomtest(first, first + second, 0.5).pvalue)


def rater_validity(
    verdicts: Iterable[Hashable],
    *,
    first: int | None = None,
    second: int | None = None,
    rule: ValidityRule | None = None,
) -> dict[str, Any]:
    """``{"verdicts", "constant_verdict", "constant_share", "first", "second", "p_value", "flagged",
    "why", "tested", "min_verdicts"}`` of one rater: ``verdicts`` are its parsed answers (any hashable: a
    choice, a ballot as a tuple), ``first`` / ``second`` its picks of the first / second position when
    positions apply; ``tested`` is false below ``min_verdicts`` (too few verdicts to judge it, so it is not
    flagged, and a report says so rather than implying it passed)."""
    rule = rule or ValidityRule()
    counts = Counter(verdicts)
    n = sum(counts.values())
    mode, top = counts.most_common(1)[0] if counts else (None, 0)
    share = top / n if n else None
    p_value = position_p_value(first, second) if first is not None and second is not None else None
    why = []
    if n >= rule.min_verdicts:
        if share is not None and share > rule.max_constant_share:
            why.append(
                f"the same verdict {mode!r} in {top} of {n} ({share:.0%} > {rule.max_constant_share:.0%}): "
                "constant, not a judgment of the content"
            )
        if p_value is not None and p_value < rule.alpha:
            why.append(
                f"first position in {first} of {first + second} A/B picks (binomial p = {p_value:.2g} < {rule.alpha}): "
                "position bias"
            )
    return {
        "verdicts": n,
        "constant_verdict": mode if isinstance(mode, str | None) else list(mode) if isinstance(mode, tuple) else mode,
        "constant_share": None if share is None else round(share, 4),
        "first": first,
        "second": second,
        "p_value": p_value,
        "flagged": bool(why),
        "why": "; ".join(why) or None,
        "tested": n >= rule.min_verdicts,
        "min_verdicts": rule.min_verdicts,
    }
