"""SFT rows from the team's right verdicts: (definition + question) -> the team's reasoned verdict.

The prompt is the single-LLM tagger's template without demonstrations, so the distilled model is
evaluated as the ``single_llm`` system (in text mode: the rows are the same whichever output mode
the team ran in); the target walks through the sub-constraints (judge reasoning, or the numbers
and the checking program) and ends with ``<Yes>``/``<No>``.
Row format (shared): ``{"id", "source": "tagging", "messages": [...], "meta": {...}}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents import PromptTemplate
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.data import TaggingExample
from pipelines.tagging.team import TeamVerdict
from pipelines.training.rows import sft_row

VERDICT_TEMPLATE = PromptTemplate(Path(__file__).parent / "agents", "verdict")
TAGGER = make_single_llm()


def reasoned_verdict(result: TeamVerdict, language: str) -> str:
    """The assistant target text for one team verdict."""
    return VERDICT_TEMPLATE.render_block(language, "assistant", constraints=result.constraints, verdict=result.verdict)


def sft_row_for(
    example: TaggingExample,
    result: TeamVerdict | None,
    *,
    require_no_failures: bool = True,
    model: str = "",
) -> dict[str, Any] | None:
    """The row of one example whose team verdict equals its label (and had no failure, if asked), else None."""
    if result is None or int(result.verdict) != example.label:
        return None
    if require_no_failures and result.failures:
        return None
    messages = TAGGER.render(
        example.language, definition=example.definition, question=example.question, demonstrations=[]
    )
    messages.append({"role": "assistant", "content": reasoned_verdict(result, example.language)})
    meta = {
        "knowledge_id": example.knowledge_id,
        "language": example.language,
        "label": example.label,
        "constraints": len(result.constraints),
        "failures": result.failures,
        "teacher": model,
    }
    return sft_row(messages, source="tagging", sample_id=example.id, meta=meta)
