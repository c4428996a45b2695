"""Pairwise HTS judge: (dimension, topic, student, student answer, reply A, reply B) -> which reply
is better on that dimension.

The system block holds the judged dimension's criteria of the RAM2C paper's Table 5 (data:
``pipelines/evaluation/hts/criteria.<lang>.json``, the same text the human rating form shows; pass it
as the ``criteria`` variable, see :func:`load_criteria`) and the reply format, so it is
byte-identical across the items of a dimension (prefix caching) and short (one dimension's criteria,
a one-line JSON example instead of the schema). The user block names the dimension and the item:
the topic, the student's profile (grade, traits, interest, reading level: criterion 1.7 asks whether
the reply uses it), the student's answer and the two replies. Two reply forms are accepted by one
parser:

- free text: reasoning, then a last line ``Verdict: A`` / ``Verdict: B`` / ``Verdict: equal``
  (also ``<A>``, ``<B>``, ``<equal>``, and the Chinese ``结论：A`` / ``结论：相同``);
- JSON: ``{"reasoning": "...", "verdict": "A" | "B" | "equal"}`` (fenced or bare), the form a
  schema-constrained backend returns (:class:`PairwiseOutput` is that schema).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from pipelines.agents import Agent, ParseError
from pipelines.agents.parsing import json_object

Choice = Literal["A", "B", "equal"]
EQUAL_WORDS = {"equal", "tie", "same", "draw", "相同", "持平", "一样", "平局", "相当"}
WORD = r"(A|B|equal|tie|same|draw|相同|持平|一样|平局|相当)"
TAG = re.compile(rf"<\s*{WORD}\s*>", re.I)
LINE = re.compile(
    rf"(?:verdict|answer|better|结论|判断|答案)\s*[:：]\s*[*_`\"'\s]*(?:reply\s*|回复\s*)?{WORD}(?![A-Za-z])", re.I
)


CRITERIA_DIR = Path(__file__).parent.parent


@lru_cache(maxsize=8)
def load_criteria(language: str) -> dict[str, Any]:
    """``{dimension: {"label", "heading", "criteria": [{"code", "text"}...]}}`` in ``language``
    (the RAM2C paper's Table 5); FileNotFoundError names the languages there are."""
    path = CRITERIA_DIR / f"criteria.{language}.json"
    if not path.exists():
        have = sorted(p.name.split(".")[1] for p in CRITERIA_DIR.glob("criteria.*.json"))
        raise FileNotFoundError(f"{path}: no HTS criteria in language {language!r} (have: {', '.join(have)})")
    return json.loads(path.read_text(encoding="utf-8"))


class PairwiseOutput(BaseModel):
    """The JSON reply schema (json output mode): reasoning first (bounded, so a constrained small
    model cannot ramble until max_tokens), then the verdict."""

    reasoning: str = Field(max_length=240)
    verdict: Choice


class VerdictOutput(BaseModel):
    """The JSON reply without reasoning (``reasoning=False``: the offline model's reasoning is a
    letter at best, and each reasoning token costs a decode step): the verdict alone."""

    verdict: Choice


@dataclass
class PairVerdict:
    """Which reply the judge preferred (``A``, ``B`` or ``equal``) and why."""

    choice: Choice
    reasoning: str


def normalise_choice(value: Any) -> Choice:
    """``"a"``, ``"Reply B"``, ``"tie"``, ``"相同"`` ... -> ``A`` / ``B`` / ``equal``; ParseError otherwise."""
    text = str(value).strip().strip("*_`\"'.。 ").lower()
    text = re.sub(r"^(reply|response|回复)\s*", "", text)
    if text in ("a", "b"):
        return text.upper()  # type: ignore[return-value]
    if text in EQUAL_WORDS:
        return "equal"
    raise ParseError(f"verdict {value!r} is not A, B or equal")


def parse_pairwise(text: str) -> PairVerdict:
    """A reply in either form (see the module docstring) -> :class:`PairVerdict`."""
    if "{" in text and "verdict" in text:
        try:
            data = json_object(text)
        except ParseError:
            data = None
        if data is not None and "verdict" in data:
            return PairVerdict(normalise_choice(data["verdict"]), str(data.get("reasoning", "")).strip())
    matches = list(LINE.finditer(text)) or list(TAG.finditer(text))
    if not matches:
        raise ParseError("no verdict found; expected a last line 'Verdict: A', 'Verdict: B' or 'Verdict: equal'")
    last = matches[-1]
    return PairVerdict(normalise_choice(last.group(1)), text[: last.start()].strip())


def from_output(output: PairwiseOutput | VerdictOutput) -> PairVerdict:
    """The typed JSON reply mapped to the same result as the text parser."""
    return PairVerdict(output.verdict, getattr(output, "reasoning", "").strip())


def make_pairwise_judge(*, reasoning: bool = True, **options: Any) -> Agent[PairVerdict]:
    """The judge agent (role ``hts_judge``); ``options`` go to :class:`Agent` (max_attempts,
    sampling overrides, ...). Its typed output is :class:`PairwiseOutput` (:class:`VerdictOutput`
    without ``reasoning``; render with the same ``reasoning`` variable), mapped by :func:`from_output`,
    so ``mode="json"`` constrains replies to that schema."""
    options.setdefault("role", "hts_judge")
    options.setdefault("output", PairwiseOutput if reasoning else VerdictOutput)
    options.setdefault("from_output", from_output)
    return Agent("pairwise_judge", Path(__file__).parent, parse_pairwise, **options)
