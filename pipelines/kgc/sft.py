"""SFT rows from the team's final answers: the scored expert's round-0 prompt (its knowledge
background, the sentence and the task) -> its final extraction in the output mode's format."""

from __future__ import annotations

from typing import Any

from pipelines.kgc.parsing import answer_text
from pipelines.kgc.schema import Sentence
from pipelines.kgc.team import TeamResult
from pipelines.training.rows import RowError, sft_row


def sft_row_for(
    sentence: Sentence, result: TeamResult, *, min_f1: float, f1: float, mode: str, model: str = ""
) -> dict[str, Any] | None:
    """The row of one sentence, or None when its final answer scores below ``min_f1`` (or is empty
    while gold is not) or the round-0 prompt is missing."""
    first = result.rounds[0][result.primary] if result.rounds else None
    if first is None or not first.prompt or f1 < min_f1:
        return None
    items = result.final.items
    if not items and sentence.gold():
        return None
    messages = [*first.prompt, {"role": "assistant", "content": answer_text(sentence.task, items, mode=mode)}]
    meta = {
        "task": sentence.task,
        "dataset": sentence.dataset,
        "language": sentence.language,
        "rounds": len(result.rounds) - 1,
        "f1": round(f1, 4),
        "output_mode": mode,
        "teacher": model,
    }
    try:
        return sft_row(messages, source="kgc", sample_id=sentence.id.replace(":", "-"), meta=meta)
    except RowError:
        return None
