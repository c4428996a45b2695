"""The prompt cases of every tagging role, rendered in English and Chinese, and the golden file.

``golden/prompts.json`` holds the exact messages of every case (text and json mode) and the SFT
target (reviewed by hand); each role's test compares its own cases (:func:`assert_golden`). After
an intended template change, regenerate with ``EDUMAS_UPDATE_GOLDEN=1 pytest tests/tagging/agents``
and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pipelines.agents import Agent
from pipelines.tagging.agents.numerical_judge import make_arg_extractor, make_program_writer
from pipelines.tagging.agents.planner import make_planner
from pipelines.tagging.agents.semantic_judge import make_semantic_judge, semantic_examples
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.agents.solver import make_solver
from pipelines.tagging.agents.worked_examples import PlannerExamples, SemanticExamples
from pipelines.tagging.numerical import ConstraintOutcome
from pipelines.tagging.sft import reasoned_verdict
from pipelines.tagging.team import TeamVerdict

GOLDEN = Path(__file__).parents[1] / "golden" / "prompts.json"
LANGUAGES = ("en", "zh")
DEMOS = {
    "en": [
        {"question": "A box holds 45 pens. How many pens are in 2 boxes?", "label": 1, "rationale": "45 x 2. <Yes>"},
        {"question": "Tom has 72 pens and gets 8 more. How many now?", "label": 0, "rationale": None},
    ],
    "zh": [
        {"question": "每盒有 45 支笔，2 盒有多少支？", "label": 1, "rationale": "45×2。<Yes>"},
        {"question": "小明有 72 支笔，又得到 8 支，现在有多少支？", "label": 0, "rationale": None},
    ],
}
TEXT = {
    "en": {
        "definition": "Multiplying a two-digit number by a one-digit number.",
        "question": "A box holds 47 pens. How many pens are in 6 boxes?",
        "solution": "47 x 6 = 282. Final answer: 282",
        "constraint": "Is the first factor a two-digit number?",
    },
    "zh": {
        "definition": "两位数乘一位数。",
        "question": "每盒有 47 支笔，6 盒有多少支？",
        "solution": "47×6=282。最终答案：282",
        "constraint": "第一个因数是否是两位数？",
    },
}


OTHER_CONCEPT = {  # a demonstration of another concept (few rows per concept) shows its own definition
    "en": [{"definition": "Addition within 100.", "question": "What is 40 + 7?", "label": 1, "rationale": None}],
    "zh": [{"definition": "100 以内的加法。", "question": "40 + 7 等于多少？", "label": 1, "rationale": None}],
}
PLANNER_EXAMPLES = {lang: PlannerExamples(k=2, seed=0).for_definition("", lang) for lang in LANGUAGES}
WRITER = {
    lang: {**{k: TEXT[lang][k] for k in ("definition", "question", "constraint")}, "variables": "first_factor = 47"}
    for lang in LANGUAGES
}


def _shipped(lang):
    """The semantic judge's examples from the shipped file, as the team passes them."""
    return semantic_examples([], SemanticExamples().pair_for(TEXT[lang]["definition"], lang), TEXT[lang]["definition"])


SHIPPED = {lang: _shipped(lang) for lang in LANGUAGES}
ROLE_CASES = {
    "planner": ("planner",),
    "solver": ("solver",),
    "semantic_judge": (
        "semantic_judge",
        "semantic_judge_no_demos",
        "semantic_judge_other_concept",
        "semantic_judge_shipped_examples",
    ),
    "numerical_judge": ("arg_extractor", "program_writer", "program_writer_comparisons"),
    "single_llm": ("single_llm", "single_llm_other_concept"),
}
"""Each role module's cases (``pipelines/tagging/agents/<role>.py``), checked in ``test_<role>.py``."""


def cases(lang: str) -> dict[str, tuple[Agent, dict[str, Any]]]:
    """Every case: its agent and the template variables it is rendered with."""
    t = TEXT[lang]
    return {
        "planner": (make_planner(), {"definition": t["definition"], "examples": PLANNER_EXAMPLES[lang]}),
        "solver": (make_solver(), {"question": t["question"]}),
        "semantic_judge": (make_semantic_judge(), {**t, "demonstrations": DEMOS[lang]}),
        "semantic_judge_no_demos": (make_semantic_judge(), {**t, "demonstrations": []}),
        "semantic_judge_other_concept": (make_semantic_judge(), {**t, "demonstrations": OTHER_CONCEPT[lang]}),
        "semantic_judge_shipped_examples": (make_semantic_judge(), {**t, "demonstrations": SHIPPED[lang]}),
        "arg_extractor": (
            make_arg_extractor(),
            {k: t[k] for k in ("definition", "constraint", "question", "solution")},
        ),
        "program_writer": (make_program_writer(), {**WRITER[lang], "program": "python"}),
        "program_writer_comparisons": (make_program_writer("comparisons"), {**WRITER[lang], "program": "comparisons"}),
        "single_llm": (
            make_single_llm(),
            {"definition": t["definition"], "question": t["question"], "demonstrations": DEMOS[lang]},
        ),
        "single_llm_other_concept": (
            make_single_llm(),
            {"definition": t["definition"], "question": t["question"], "demonstrations": OTHER_CONCEPT[lang]},
        ),
    }


def sft_target(lang: str) -> str:
    """The SFT target of a verdict with a judged semantic and a failed numerical sub-constraint."""
    verdict = TeamVerdict(
        False,
        [
            ConstraintOutcome("semantic", TEXT[lang]["constraint"], True, "semantic_judge", reasoning="It multiplies."),
            ConstraintOutcome(
                "numerical",
                TEXT[lang]["constraint"],
                False,
                "numerical_judge",
                arguments="first_factor = 147",
                program="print(10 <= first_factor <= 99)",
            ),
        ],
    )
    return reasoned_verdict(verdict, lang)


def rendered(names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``<case>.<lang>`` and ``<case>.json.<lang>`` -> rendered messages, for the named cases (all
    when None, then with ``sft_target.<lang>`` too), in the golden file's order."""
    out: dict[str, Any] = {}
    for lang in LANGUAGES:
        for name, (agent, vars) in cases(lang).items():
            if names is None or name in names:
                out[f"{name}.{lang}"] = agent.render(lang, **vars)
                out[f"{name}.json.{lang}"] = agent.render(lang, output_mode="json", **vars)
        if names is None:
            out[f"sft_target.{lang}"] = sft_target(lang)
    return out


def rendered_role(role: str) -> dict[str, Any]:
    """The rendered cases of one role module (:data:`ROLE_CASES`)."""
    return rendered(ROLE_CASES[role])


def golden() -> dict[str, Any]:
    """The golden file, first rewritten from :func:`rendered` when ``EDUMAS_UPDATE_GOLDEN=1``."""
    if os.environ.get("EDUMAS_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(rendered(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def assert_golden(actual: dict[str, Any]) -> None:
    """``actual`` equals the golden file's entries of the same cases, and the file has no other entry of them."""
    expected = golden()
    names = {key.split(".")[0] for key in actual}
    assert sorted(actual) == sorted(key for key in expected if key.split(".")[0] in names)
    for key in actual:
        assert actual[key] == expected[key], key
