"""The sample inputs every RAM2C agent is rendered with, in English and Chinese, and the golden file
of the exact rendered messages (``golden/prompts.json``, reviewed by hand).

A key of the golden file is ``<case>.<lang>`` (``<case>_json.<lang>`` for json mode); a case is an
agent's name, or its name and a variant (``student_later_turn``, ``analyst_no_reference``). After an
intended template change, regenerate with ``EDUMAS_UPDATE_GOLDEN=1 pytest tests/ram2c/agents`` and
review the diff.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from pipelines.agents import Agent
from pipelines.ram2c.agents import make_agents
from pipelines.ram2c.groups import group_experts
from pipelines.ram2c.scenario import load_scenario, theme_names
from pipelines.ram2c.students import make_personas

GOLDEN = Path(__file__).parent / "golden" / "prompts.json"
LANGUAGES = ("en", "zh")
AGENTS = make_agents()
TEXT = {
    "en": {
        "book": "The Lighthouse Apprentice",
        "topic": "Why did Mara take the lantern?",
        "answer": "Because Tobin was hurt and ships were out there.",
        "reply": "Good thinking! What would you do?",
        "passage": "Mara looked at the stair, then at the old man.",
        "group_name": "language teachers",
    },
    "zh": {
        "book": "灯塔的学徒",
        "topic": "玛拉为什么接过提灯？",
        "answer": "因为托宾受伤了，海上还有船。",
        "reply": "想得真好！换作你会怎么做？",
        "passage": "玛拉看看楼梯，又看看老人。",
        "group_name": "语文教师",
    },
}


def cases(lang: str) -> dict[str, dict[str, Any]]:
    """Every case's template variables in ``lang``."""
    t = TEXT[lang]
    student = make_personas(1, lang, seed=0)[0].to_vars()
    expert = group_experts("T", 1, lang)[0].to_vars()
    history = [{"role": "user", "content": t["answer"]}, {"role": "assistant", "content": t["reply"]}]
    common = {"topic": t["topic"], "answer": t["answer"], "reply": t["reply"]}
    scenario = load_scenario()
    level, direction = scenario["levels"]["recall"][lang], scenario["directions"]["plot"][lang]
    return {
        "topic_writer": {
            "book": t["book"],
            "chapter": 1,
            "passage": t["passage"],
            "level": level,
            "direction": direction,
            "avoid": theme_names(["religion"], lang),
        },
        "student": {"book": t["book"], "student": student, "topic": t["topic"], "teacher_reply": None},
        "student_later_turn": {"book": t["book"], "student": student, "topic": t["topic"], "teacher_reply": t["reply"]},
        "drafter": {"book": t["book"], "topic": t["topic"], "student": student, "answer": t["answer"], "history": []},
        "drafter_later_turn": {
            "book": t["book"],
            "topic": t["topic"],
            "student": student,
            "answer": t["answer"],
            "history": history,
        },
        "voter": {**common, "expert": expert, "group_name": t["group_name"], "document": t["passage"]},
        "ballot": {**common, "expert": expert, "group_name": t["group_name"], "documents": [t["passage"], t["reply"]]},
        "analyst": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "reference": t["passage"],
        },
        "analyst_no_reference": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "reference": None,
        },
        "analyst_reviser": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "reference": t["passage"],
        },
        "analyst_reviser_no_reference": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "reference": None,
        },
        "reviser": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "analysis": "The student is caring.",
        },
        "synthesizer": {
            "topic": t["topic"],
            "answer": t["answer"],
            "student": student,
            "revisions": ["First version.", "Second version."],
        },
    }


JSON_CASES = (
    "ballot",
    "voter",
    "analyst",
    "reviser",
    "analyst_reviser",
    "synthesizer",
    "drafter",
    "student",
    "topic_writer",
)
"""Cases also rendered in json mode (the default output mode): the one-line reply example in the system text."""


def agent_name(case: str) -> str:
    """The agent a case renders: ``student_later_turn`` -> ``student``."""
    return case.split("_later")[0].split("_no_")[0]


def agent_of(case: str) -> Agent:
    name = agent_name(case)
    return AGENTS["ballot:2" if name == "ballot" else name]


def render_all() -> dict[str, list[dict[str, str]]]:
    """Every golden key and its rendered messages."""
    out = {}
    for lang in LANGUAGES:
        for case, vars in cases(lang).items():
            out[f"{case}.{lang}"] = agent_of(case).render(lang, **vars)
            if case in JSON_CASES:
                out[f"{case}_json.{lang}"] = agent_of(case).render(lang, output_mode="json", **vars)
    return out


def golden_keys(*agents: str) -> list[str]:
    """The golden keys of ``agents``' cases, in both languages and both output modes."""
    return [key for key in render_all() if agent_name(key.split(".")[0].removesuffix("_json")) in agents]


@cache
def golden() -> dict[str, Any]:
    """The golden file, first rewritten from the templates when ``EDUMAS_UPDATE_GOLDEN`` is set."""
    if os.environ.get("EDUMAS_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(render_all(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def assert_matches_golden(key: str) -> None:
    case, lang = key.rsplit(".", 1)
    mode = "json" if case.endswith("_json") else "text"
    case = case.removesuffix("_json")
    assert agent_of(case).render(lang, output_mode=mode, **cases(lang)[case]) == golden()[key], key
