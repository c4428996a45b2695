"""Scripted replies for the tagging team in tests: well-formed answers for every agent, chosen by
the agent's system prompt, with the numbers taken from the question (so verdicts are real)."""

from __future__ import annotations

import json
import re

from pipelines.llm.scripted import ScriptedBackend

# Replies matched by a phrase of each agent's prompt (the scripted backend's replies-file form), in text mode.
STAGE_REPLIES = [
    {"match": "task planner", "reply": "<semantic> Does the question fit?\n<numerical> Is the first number positive?"},
    {"match": "question solver", "reply": "Compute it. Final answer: 12"},
    {"match": "semantic judge", "reply": "It fits. <Yes>"},
    {"match": "First step: extract", "reply": '{"first": 5}'},
    {"match": "Second step: write", "reply": "```python\nprint(first > 0)\n```"},
    {"match": "expert math teacher", "reply": "Not this one. <No>"},
]

PLAN_EN = "<semantic> Does the question ask for a product?\n<numerical> Is the first number a two-digit number?"


def numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def question_of(messages) -> str:
    match = re.search(r"(?:Question|题目)[:：] ?(.*)", messages[-1]["content"])
    return match.group(1) if match else ""


def team_rules(plan: str = PLAN_EN, semantic: str = "The question multiplies. <Yes>", program: str | None = None):
    """Rules answering planner, solver, judges; the program checks 10 <= first <= 99 by default."""
    code = program or "print(10 <= first <= 99)"
    return [
        (r"task planner|任务规划者", plan),
        (r"question solver|解题者", lambda m: f"Multiply the numbers. Final answer: {numbers(question_of(m))[:1]}"),
        (r"semantic judge|语义判断者", semantic),
        (r"First step: extract|第一步", lambda m: json.dumps({"first": numbers(question_of(m))[0]})),
        (r"Second step: write|第二步", f"```python\n{code}\n```"),
        (r"expert math teacher|数学老师", "The numbers fit. <Yes>"),
    ]


def team_backend(**kwargs) -> ScriptedBackend:
    delay = kwargs.pop("delay_s", 0.0)
    return ScriptedBackend(team_rules(**kwargs), delay_s=delay)
