"""The RAM2C agents: templates ``<agent>.<lang>.j2`` beside this file and their parsers.

    topic_writer  passage, level, direction      -> one discussion question (Q)
    student       persona, topic, teacher reply  -> the student's answer (A)
    drafter       the pair's prompt messages     -> the raw reply (R2, rejected)
    voter         expert, context, one document  -> yes / no (group reflection)
    analyst       expert, context, its reference -> explicit analysis (proactive analysis)
    reviser       expert, context, its analysis  -> that expert's revision
    synthesizer   context, the group's revisions -> the group's reply (E group's = R1, chosen)

Every parser takes plain text or a JSON object (``{"question": ...}``, ``{"reply": ...}``,
``{"vote": "yes"}``, ``{"analysis": ...}``) so the same agents work in text and json modes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from pipelines.agents import Agent, ParseError
from pipelines.llm.types import Message

FOLDER = Path(__file__).parent
LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:teacher|reply|final reply|improved reply|revised reply|response|answer|student|question|"
    r"analysis|老师|教师|回复|最终回复|改进后的回复|回答|学生|问题|分析)(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*",
    re.I,
)
QUOTES = "\"'“”‘’「」`"


class QuestionOut(BaseModel):
    """json mode of the topic writer."""

    question: str = Field(min_length=1, max_length=400)

    def to_result(self) -> str:
        return parse_question(self.question)


class ReplyOut(BaseModel):
    """json mode of the student, drafter, reviser and synthesizer."""

    reply: str = Field(min_length=1, max_length=2000)

    def to_result(self) -> str:
        return parse_reply(self.reply)


class VoteOut(BaseModel):
    """json mode of a group-reflection vote."""

    vote: Literal["yes", "no"]
    reason: str = Field("", max_length=300)

    def to_result(self) -> bool:
        return self.vote == "yes"


class AnalysisOut(BaseModel):
    """json mode of the proactive analysis."""

    analysis: str = Field(min_length=1, max_length=1500)

    def to_result(self) -> str:
        return parse_analysis(self.analysis)


def _json_field(text: str, field: str) -> Any:
    """``field`` of the first JSON object in ``text``, or None when there is none."""
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except (json.JSONDecodeError, ValueError):
        return None
    return data.get(field) if isinstance(data, dict) else None


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


def parse_question(text: str) -> str:
    """One discussion question: the first line holding a question mark, else the first line."""
    value = _json_field(text, "question")
    body = value if isinstance(value, str) else text
    lines = [clean_text(line) for line in body.strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise ParseError("no question in the reply")
    asked = [line for line in lines if "?" in line or "？" in line]
    question = (asked or lines)[0]
    if "?" in question or "？" in question:
        cut = max(question.find("?"), question.find("？"))
        question = question[: cut + 1]
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


class Ram2cAgent(Agent):
    """An agent whose json-mode reply falls back to the text parser (which reads JSON objects too)
    when it does not validate: until every backend constrains decoding to the schema, a small model
    in json mode may still answer in plain text, and a usable answer is not thrown away."""

    def parse(self, text: str | None, mode: str = "text", **options: Any):
        try:
            return super().parse(text, mode, **options)
        except ParseError:
            if mode != "json":
                raise
            return super().parse(text, "text")


class ConversationAgent(Ram2cAgent):
    """An agent whose prompt is its system block, then ``history`` (earlier turns), then its user block.

    The drafter is one: its rendered messages are exactly the prompt of the preference pair.
    """

    def render(self, language: str | None = None, *, output_mode: str = "text", **vars: Any) -> list[Message]:
        history: list[Message] = list(vars.pop("history", []) or [])
        messages = super().render(language, output_mode=output_mode, **vars)
        return messages[:-1] + history + messages[-1:]


def make_agents(*, max_tokens: dict[str, int] | None = None, **options: Any) -> dict[str, Agent]:
    """Every RAM2C agent by name; ``max_tokens`` per agent, ``options`` for all (attempts, retry temperature)."""
    tokens = max_tokens or {}
    parsers = {
        "topic_writer": parse_question,
        "student": parse_reply,
        "voter": parse_vote,
        "analyst": parse_analysis,
        "reviser": parse_reply,
        "synthesizer": parse_reply,
    }
    outputs = {"topic_writer": QuestionOut, "voter": VoteOut, "analyst": AnalysisOut}
    roles = {"voter": "expert", "analyst": "expert", "reviser": "expert"}
    agents: dict[str, Agent] = {
        name: Ram2cAgent(
            name,
            FOLDER,
            parser,
            role=roles.get(name),
            output=outputs.get(name, ReplyOut),
            max_tokens=tokens.get(name),
            **options,
        )
        for name, parser in parsers.items()
    }
    agents["drafter"] = ConversationAgent(
        "drafter", FOLDER, parse_reply, output=ReplyOut, max_tokens=tokens.get("drafter"), **options
    )
    return agents
