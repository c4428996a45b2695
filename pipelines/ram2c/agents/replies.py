"""The replies of the RAM2C agents: the json-mode output models (each with a one-line
``EXAMPLES`` per language and ``to_result``) and the parsers that read plain text or a JSON object
(``{"question": ...}``, ``{"reply": ...}``, ``{"vote": "yes"}``, ``{"1": "yes", "2": "no"}``,
``{"analysis": ...}``, ``{"analysis": ..., "reply": ...}``); every parser raises ParseError for an
empty or unusable reply."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipelines.agents import ParseError

LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:teacher|reply|final reply|improved reply|revised reply|response|answer|student|question|"
    r"analysis|老师|教师|回复|最终回复|改进后的回复|回答|学生|问题|分析)(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*",
    re.I,
)
QUOTES = "\"'“”‘’「」`"


# The content rules of parse_question, in the schema the backend enforces (as a regular expression:
# xgrammar reads no minLength/maxLength beside a pattern): one line of 8-120 characters (inside
# max_tokens.topic_writer, 40) ending with "?" or "？", without "<", ">", braces, quotes or
# backslashes, so the example's placeholder, a JSON fragment or a long copy of the passage cannot be decoded.
QUESTION_CHARS = (8, 120)
QUESTION_PATTERN = rf'^[^<>{{}}"\\\n]{{{QUESTION_CHARS[0] - 1},{QUESTION_CHARS[1] - 1}}}[?？]$'


class QuestionOut(BaseModel):
    """json mode of the topic writer."""

    EXAMPLES: ClassVar[dict[str, str]] = {
        "en": '{"question": "<your question to the student, ending with ?>"}',
        "zh": '{"question": "<你向学生提的问题，以？结尾>"}',
    }
    question: str = Field(pattern=QUESTION_PATTERN)

    def to_result(self) -> str:
        return parse_question(self.question)


class ReplyOut(BaseModel):
    """json mode of the student, drafter, reviser and synthesizer."""

    EXAMPLES: ClassVar[dict[str, str]] = {"en": '{"reply": "<your reply>"}', "zh": '{"reply": "<你的回复>"}'}
    reply: str = Field(min_length=1, max_length=2000)

    def to_result(self) -> str:
        return parse_reply(self.reply)


class VoteOut(BaseModel):
    """json mode of a group-reflection vote on one document."""

    EXAMPLES: ClassVar[dict[str, str]] = {"en": '{"vote": "<yes or no>"}', "zh": '{"vote": "<yes 或 no>"}'}
    vote: Literal["yes", "no"]
    reason: str = Field("", max_length=300)

    def to_result(self) -> bool:
        return self.vote == "yes"


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


def _json_dict(text: str) -> dict[str, Any] | None:
    """The JSON object from the first ``{`` to the last ``}`` of ``text``, or None when there is none."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except (json.JSONDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _json_field(text: str, field: str) -> Any:
    """``field`` of the first JSON object in ``text``, or None when there is none."""
    data = _json_dict(text)
    return data.get(field) if data is not None else None


def clean_text(text: str) -> str:
    """Reply text without a leading label (``Teacher:``, ``回复：``), code fences or wrapping quotes."""
    text = text.strip().removeprefix("```").removesuffix("```").strip()
    text = LABEL.sub("", text, count=1).strip()
    if len(text) > 1 and text[0] in QUOTES and text[-1] in QUOTES:
        text = text[1:-1].strip()
    return text


def _text_of(reply: str, field: str) -> str:
    value = _json_field(reply, field)
    text = clean_text(value if isinstance(value, str) else reply)
    if not text:
        raise ParseError(f"no {field} text in the reply")
    return text


def parse_reply(text: str) -> str:
    """A reply addressed to the student (teacher's or student's); ParseError when nothing is left."""
    return _text_of(text, "reply")


def parse_analysis(text: str) -> str:
    return _text_of(text, "analysis")


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
    data = _json_dict(text) or {}
    analysis, reply = data.get("analysis"), data.get("reply")
    if not (isinstance(analysis, str) and isinstance(reply, str)):
        labels = list(REPLY_LABEL.finditer(text))
        if not labels:
            raise ParseError("no 'Reply:' line after the analysis")
        label = labels[-1]
        analysis, reply = text[: label.start()], text[label.end() :]
    return {"analysis": parse_analysis(analysis), "reply": parse_reply(reply)}


def parse_question(text: str) -> str:
    """One discussion question: the first line holding a question mark, cut after it. A reply with
    no question mark is not a question (a small model in json mode often copies the passage or the
    book line instead) and raises ParseError, so the agent re-asks."""
    value = _json_field(text, "question")
    body = value if isinstance(value, str) else text
    lines = [clean_text(line) for line in body.strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise ParseError("no question in the reply")
    asked = [line for line in lines if "?" in line or "？" in line]
    question = (asked or lines)[0]
    if "?" not in question and "？" not in question:
        raise ParseError(f"not a question (no question mark): {question[:80]!r}")
    marks = [i for i in (question.find("?"), question.find("？")) if i >= 0]
    question = question[: min(marks) + 1]
    if len(question) < 8:
        raise ParseError(f"question too short: {question!r}")
    return question


YES = re.compile(r"\b(yes|useful|accept)\b|是|有参考价值|有用", re.I)
NO = re.compile(r"\b(no|not|reject)\b|否|没有|无", re.I)


def parse_vote(text: str) -> bool:
    """True for yes, False for no: the JSON ``vote`` field, else the earliest yes/no word."""
    value = _json_field(text, "vote")
    if isinstance(value, str) and value.strip().lower() in ("yes", "no", "是", "否"):
        return value.strip().lower() in ("yes", "是")
    yes, no = YES.search(text), NO.search(text)
    if yes is None and no is None:
        raise ParseError("no yes/no vote in the reply")
    if no is None:
        return True
    if yes is None:
        return False
    return yes.start() < no.start()


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
    data: Any = _json_dict(text)
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
