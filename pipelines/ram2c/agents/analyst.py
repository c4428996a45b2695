"""The proactive analysis of one expert (role ``expert``), in two templates:

    analyst          expert, context, its reference -> explicit analysis (``expert_call: split``,
                     then :mod:`pipelines.ram2c.agents.reviser` revises from it)
    analyst_reviser  expert, context, its reference -> its analysis, then its revision, in one reply
                     (``expert_call: joint``, the default: the analysis is the revision's chain of thought)

``{"analysis": ...}`` and ``{"analysis": ..., "reply": ...}`` in json mode, or plain text.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import BaseModel, Field, create_model

from pipelines.agents import ParseError
from pipelines.ram2c.agents.agent import FOLDER, Ram2cAgent
from pipelines.ram2c.agents.reply import parse_reply
from pipelines.ram2c.agents.reply_text import json_dict, text_of

ANALYST = "analyst"
ANALYST_REVISER = "analyst_reviser"


class AnalysisOut(BaseModel):
    """json mode of the proactive analysis."""

    EXAMPLES: ClassVar[dict[str, str]] = {"en": '{"analysis": "<your analysis>"}', "zh": '{"analysis": "<你的分析>"}'}
    analysis: str = Field(min_length=1, max_length=1500)

    def to_result(self) -> str:
        return parse_analysis(self.analysis)


class AnalysedRevisionOut(BaseModel):
    """json mode of ``analyst_reviser``: the analysis first (decoded first, so the revision is
    written after it), then the revision. :func:`analysed_revision_output` bounds the analysis."""

    EXAMPLES: ClassVar[dict[str, str]] = {
        "en": '{"analysis": "<your analysis>", "reply": "<your revision>"}',
        "zh": '{"analysis": "<你的分析>", "reply": "<你的修改稿>"}',
    }
    analysis: str = Field(min_length=1, max_length=1500)
    reply: str = Field(min_length=1, max_length=2000)

    def to_result(self) -> dict[str, str]:
        return {"analysis": parse_analysis(self.analysis), "reply": parse_reply(self.reply)}


def analysed_revision_output(analysis_chars: int) -> type[AnalysedRevisionOut]:
    """``AnalysedRevisionOut`` whose analysis holds at most ``analysis_chars`` characters: under
    constrained decoding a small model's analysis cannot use up ``max_tokens`` and leave the
    revision unwritten."""
    return create_model(
        f"AnalysedRevisionOut{analysis_chars}",
        __base__=AnalysedRevisionOut,
        analysis=(str, Field(min_length=1, max_length=analysis_chars)),
    )


def parse_analysis(text: str) -> str:
    return text_of(text, "analysis")


REPLY_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:reply|revision|revised reply|improved reply|回复|修改稿|改进后的回复)"
    r"(?:\*\*)?\s*[:：]\s*(?:\*\*)?",
    re.I | re.M,
)


def parse_analysed_revision(text: str) -> dict[str, str]:
    """``{"analysis": ..., "reply": ...}`` from a JSON object with both fields, or from text with an
    ``Analysis:`` part and a ``Reply:`` line (``分析：`` / ``回复：``); the reply is everything after its
    label. ParseError when either part is missing or empty (a revision without its analysis is not
    the method's proactive analysis)."""
    data = json_dict(text) or {}
    analysis, reply = data.get("analysis"), data.get("reply")
    if not (isinstance(analysis, str) and isinstance(reply, str)):
        labels = list(REPLY_LABEL.finditer(text))
        if not labels:
            raise ParseError("no 'Reply:' line after the analysis")
        label = labels[-1]
        analysis, reply = text[: label.start()], text[label.end() :]
    return {"analysis": parse_analysis(analysis), "reply": parse_reply(reply)}


def make_analyst(*, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    return Ram2cAgent(
        ANALYST, FOLDER, parse_analysis, role="expert", output=AnalysisOut, max_tokens=max_tokens, **options
    )


def make_analyst_reviser(*, analysis_chars: int = 600, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    """``analysis_chars`` bounds the analysis in json mode."""
    return Ram2cAgent(
        ANALYST_REVISER,
        FOLDER,
        parse_analysed_revision,
        role="expert",
        output=analysed_revision_output(analysis_chars),
        max_tokens=max_tokens,
        **options,
    )
