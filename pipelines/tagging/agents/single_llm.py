"""Single-LLM baseline: one model, few-shot chain of thought (definition + question -> <Yes>/<No>).

With no demonstrations the same template is the prompt of the distilled tagger (SFT rows), so a
model tuned on the team's traces can be dropped in here and evaluated the same way.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.agents import Agent
from pipelines.tagging.agents.semantic_judge import Judgment, JudgmentOutput, parse_judgment


def make_single_llm(**options) -> Agent[Judgment]:
    options.setdefault("role", "single_llm")
    return Agent("single_llm", Path(__file__).parent, parse_judgment, output=JudgmentOutput, **options)
