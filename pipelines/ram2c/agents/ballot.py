"""The ballot (template ``ballot``, role ``expert``): expert, context, all documents -> yes / no per
document (group reflection in one call). One agent per number of documents: its schema and parser
expect exactly that many verdicts."""

from __future__ import annotations

import json
import re
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipelines.agents import ParseError
from pipelines.ram2c.agents.agent import FOLDER, Ram2cAgent
from pipelines.ram2c.agents.reply_text import json_dict

NAME = "ballot"


def ballot_output(n: int) -> type[BaseModel]:
    """json mode of one expert's ballot on ``n`` documents: ``{"1": "yes", ..., "<n>": "no"}``, every
    number required (so constrained decoding gives exactly one verdict per document)."""
    fields: dict[str, Any] = {f"d{i}": (Literal["yes", "no"], Field(alias=str(i))) for i in range(1, n + 1)}
    model = create_model(f"BallotOut{n}", __config__=ConfigDict(extra="forbid"), **fields)
    model.EXAMPLES = {
        lang: "{" + ", ".join(f'"{i}": "{value}"' for i in range(1, n + 1)) + "}"
        for lang, value in (("en", "<yes or no>"), ("zh", "<yes 或 no>"))
    }
    model.to_result = lambda self: [getattr(self, f"d{i}") == "yes" for i in range(1, n + 1)]
    return model


VERDICT = r"(yes|no|是|否)(?![A-Za-z])"
NUMBERED = re.compile(
    rf"(?:document|doc|文档|第)?\s*#?\**([0-9]{{1,3}})\**\s*篇?\s*[:：.)\-、]?\s*\**\s*{VERDICT}", re.I
)
BARE = re.compile(rf"(?<![A-Za-z]){VERDICT}", re.I)


def _verdict(word: str) -> bool:
    return word.lower() in ("yes", "是")


def parse_ballot(text: str, n: int) -> list[bool | None]:
    """One verdict per document (1..n): True yes, False no, None when the ballot skipped it.

    Reads a JSON object keyed by document number (``{"1": "yes", "2": "no"}``) or a JSON list, else
    numbered lines (``1: yes``, ``Document 2 - no``, ``文档2：否``), else exactly ``n`` bare yes/no words
    in order. ParseError when no verdict at all is found.
    """
    data: Any = json_dict(text)
    if data is None and text.strip().startswith("["):
        try:
            data = json.loads(text.strip())
        except (json.JSONDecodeError, ValueError):
            data = None
    votes: list[bool | None] = [None] * n
    if isinstance(data, list):
        data = {str(i + 1): v for i, v in enumerate(data)}
    if isinstance(data, dict):
        for key, value in data.items():
            digits = re.sub(r"\D", "", str(key))
            if digits and 1 <= int(digits) <= n and isinstance(value, (str, bool)):
                word = ("yes" if value else "no") if isinstance(value, bool) else value.strip()
                if word.lower() in ("yes", "no", "是", "否"):
                    votes[int(digits) - 1] = _verdict(word)
    if all(v is None for v in votes):
        for number, word in NUMBERED.findall(text):
            if 1 <= int(number) <= n and votes[int(number) - 1] is None:
                votes[int(number) - 1] = _verdict(word)
    if all(v is None for v in votes):
        words = BARE.findall(text)
        if len(words) == n:
            votes = [_verdict(w) for w in words]
    if all(v is None for v in votes):
        raise ParseError(f"no yes/no verdict for any of the {n} documents")
    return votes


def make_ballot(n: int, *, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    """The ballot of one expert on ``n`` documents."""
    return Ram2cAgent(
        NAME,
        FOLDER,
        partial(parse_ballot, n=n),
        role="expert",
        output=ballot_output(n),
        max_tokens=max_tokens,
        **options,
    )
