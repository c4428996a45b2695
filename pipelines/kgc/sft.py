"""SFT rows from the team's final answers: the scored expert's round-0 prompt (its knowledge
background, the sentence and the task) -> its final extraction in the output mode's format.

Which answers become rows (``kgc.sft``):

- ``keep: correct`` (default): the final answer's *correct* extractions, those that match a gold
  item under the scorer's strict keys (for EE: events whose typed trigger is gold, with their gold
  arguments). A sentence gives a row when at least one extraction is correct, or when gold and
  answer are both empty. This is rejection sampling at the level of extractions (the paper keeps
  the answers that pass its format and schema filter; we also filter against gold because the rows
  train a model): the target never holds a wrong extraction, it may miss gold ones.
- ``keep: answer``: the whole final answer when its sentence F1 is at least ``min_f1`` (an empty
  answer only when gold is empty too).

Both require sentence F1 >= ``min_f1``. A json target has the answer form the round-0 prompt asks
for, with an empty ``reason`` first (the team's answer schema requires the field).
"""

from __future__ import annotations

from typing import Any

from pipelines.kgc.agents.experts import expert_role
from pipelines.kgc.schema import Event, Sentence
from pipelines.kgc.scoring import item_keys, norm
from pipelines.kgc.team import TeamResult
from pipelines.training.rows import RowError, sft_row


def correct_items(task: str, gold: list[Any], items: list[Any]) -> list[Any]:
    """The items of ``items`` that are gold under the scorer's keys (EE: gold triggers with their
    gold arguments), in their order."""
    keys = item_keys(task, gold)
    if task != "ee":
        return [item for item in items if item_keys(task, [item]) <= keys]
    kept = []
    for event in items:
        if ("trigger", event.type, norm(event.trigger)) in keys:
            arguments = tuple(a for a in event.arguments if ("argument", event.type, a.role, norm(a.text)) in keys)
            kept.append(Event(event.type, event.trigger, arguments))
    return kept


def sft_row_for(
    sentence: Sentence,
    result: TeamResult,
    *,
    min_f1: float,
    f1: float,
    mode: str,
    keep: str = "correct",
    model: str = "",
) -> dict[str, Any] | None:
    """The row of one sentence, or None when it does not qualify (see the module doc) or the
    round-0 prompt is missing."""
    first = result.rounds[0][result.primary] if result.rounds else None
    if first is None or not first.prompt or f1 < min_f1:
        return None
    answer, gold = result.final.items, sentence.gold()
    items = correct_items(sentence.task, gold, answer) if keep == "correct" else list(answer)
    if not items and (gold or answer):
        return None
    target = expert_role(sentence.task).answer_text(items, mode=mode, reason="" if mode == "json" else None)
    messages = [*first.prompt, {"role": "assistant", "content": target}]
    meta = {
        "task": sentence.task,
        "dataset": sentence.dataset,
        "language": sentence.language,
        "rounds": len(result.rounds) - 1,
        "f1": round(f1, 4),
        "keep": keep,
        "kept_items": len(items),
        "answer_items": len(answer),
        "output_mode": mode,
        "teacher": model,
    }
    try:
        return sft_row(messages, source="kgc", sample_id=sentence.id.replace(":", "-"), meta=meta)
    except RowError:
        return None
