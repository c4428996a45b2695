"""Reply text -> typed extractions, and typed extractions -> the paper's answer text.

Text mode reads the paper's formats from free text (after the last ``Answer:`` / ``答案：`` line
when there is one, so reasons before it are ignored):

- NER ``[(entity type, entity span), ...]``
- RE ``[(head entity, relation type, tail entity), ...]``
- EE ``[{Trigger Type: <type>, Trigger Word: <word>, Arguments: [(role, argument), ...]}, ...]``

and also Markdown tables with the same columns and JSON in the json-mode shape; ``NO`` (无/没有)
is an empty answer. Complete tuples of a truncated reply are kept; a tuple of the wrong shape is
counted in ``malformed``. A reply with nothing of the kind raises :class:`ParseError`.

Json mode validates the reply against a pydantic model per task (:mod:`pipelines.kgc.answers`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from pipelines.agents import ParseError
from pipelines.kgc.answers import ANSWER_MODELS, JSON_EXAMPLES, Extraction, answer_schema, from_model, json_example
from pipelines.kgc.schema import Argument, Entity, Event, Schema, Triple
from pipelines.kgc.scoring import norm

__all__ = [
    "ANSWER_MODELS",
    "JSON_EXAMPLES",
    "Extraction",
    "answer_schema",
    "answer_text",
    "from_model",
    "json_example",
    "ungrounded",
]

ANSWER_MARK = re.compile(r"(?:final answer|answer|答案|最终答案)\s*[:：]", re.I)
NO_ANSWER = re.compile(r"^\W*(no|none|无|没有|不存在)\W*$", re.I)
TUPLE = re.compile(r"\(([^()]*)\)")
EVENT_BLOCK = re.compile(r"\{([^{}]*)\}", re.S)
FIELD = r"\s*[:：]\s*([^,，}\n]+)"
TRIGGER_TYPE = re.compile(r"(?:trigger type|event type|事件类型|触发词类型)" + FIELD, re.I)
TRIGGER_WORD = re.compile(r"(?:trigger word|trigger|触发词)" + FIELD, re.I)
ARGUMENTS = re.compile(r"(?:arguments|论元)\s*[:：](.*)", re.I | re.S)
FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)(?:```|\Z)", re.S)


def _json_values(text: str) -> list[Any]:
    candidates = [body for body in FENCE.findall(text)] + [text]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if start != -1 and end > start:
            candidates.append(text[start : end + 1])
    values = []
    for candidate in candidates:
        try:
            values.append(json.loads(candidate.strip()))
        except json.JSONDecodeError:
            continue
    return values


def parse_json_answer(task: str, text: str) -> Extraction:
    """A json-mode reply validated by the task's pydantic model; raises :class:`ParseError`."""
    model = ANSWER_MODELS[task]
    errors = []
    for value in _json_values(text):
        try:
            return from_model(task, model.model_validate(value))
        except ValidationError as exc:
            errors.append(str(exc.errors()[0]["msg"]))
    raise ParseError(f"no JSON answer matching the {task} schema" + (f" ({errors[0]})" if errors else ""))


# ---------------------------------------------------------------- text mode


def _clean(part: str) -> str:
    return part.strip().strip("'\"“”‘’`*").strip()


def _split(body: str) -> list[str]:
    return [_clean(p) for p in re.split(r"[,，]", body)]


def _ner_tuple(parts: list[str], schema: Schema | None) -> Entity | None:
    if len(parts) < 2 or not all(parts):
        return None
    types = set(schema.entity_types) if schema else set()
    if types and parts[0] not in types and parts[-1] in types:
        return Entity(parts[-1], ", ".join(parts[:-1]))
    return Entity(parts[0], ", ".join(parts[1:]))


def _re_tuple(parts: list[str], schema: Schema | None) -> Triple | None:
    if len(parts) < 3 or not all(parts):
        return None
    if len(parts) > 3 and schema is not None:
        for index in range(1, len(parts) - 1):
            if parts[index] in schema.relations:
                return Triple(", ".join(parts[:index]), parts[index], ", ".join(parts[index + 1 :]))
    if len(parts) > 3:
        return None
    return Triple(*parts)


def _argument(body: str) -> Argument | None:
    match = re.match(r"\s*([^,，:：]+?)\s*[,，:：]\s*(.+)$", body, re.S)
    if not match:
        return None
    role, text = _clean(match.group(1)), _clean(match.group(2))
    return Argument(role, text) if role and text else None


def _events(text: str) -> tuple[list[Event], int]:
    events, malformed = [], 0
    for block in EVENT_BLOCK.findall(text):
        kind, word = TRIGGER_TYPE.search(block), TRIGGER_WORD.search(re.sub(r"(?i)trigger type", "", block))
        if not kind or not word:
            malformed += 1
            continue
        arguments: list[Argument] = []
        rest = ARGUMENTS.search(block)
        for body in TUPLE.findall(rest.group(1) if rest else ""):
            argument = _argument(body)
            if argument is None:
                malformed += 1
            elif argument not in arguments:
                arguments.append(argument)
        events.append(Event(_clean(kind.group(1)), _clean(word.group(1)), tuple(arguments)))
    return events, malformed


def _table_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [_clean(c) for c in line.strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue
        rows.append(cells)
    header = rows[0] if rows else []
    if header and any(
        re.search(r"type|entity|head|relation|role|trigger|类型|实体|关系|角色|触发", c, re.I) for c in header
    ):
        rows = rows[1:]
    return rows


def _from_table(task: str, rows: list[list[str]], schema: Schema | None) -> Extraction:
    out = Extraction()
    events: dict[tuple[str, str], list[Argument]] = {}
    for cells in rows:
        if task == "ner":
            item = _ner_tuple(cells, schema) if len(cells) == 2 else None
        elif task == "re":
            item = _re_tuple(cells, schema) if len(cells) == 3 else None
        else:
            item = None
            if len(cells) in (2, 4) and all(cells):
                arguments = events.setdefault((cells[0], cells[1]), [])
                if len(cells) == 4 and Argument(cells[2], cells[3]) not in arguments:
                    arguments.append(Argument(cells[2], cells[3]))
                continue
        if item is None:
            out.malformed += 1
        elif item not in out.items:
            out.items.append(item)
    out.items += [Event(k, w, tuple(a)) for (k, w), a in events.items()]
    return out


def parse_text_answer(task: str, text: str, schema: Schema | None = None) -> Extraction:
    """A text-mode reply in the paper's format (or a table, or json-mode JSON); see module doc."""
    marks = list(ANSWER_MARK.finditer(text))
    answer = text[marks[-1].end() :] if marks else text
    reason = text[: marks[-1].start()].strip() if marks else ""
    if NO_ANSWER.match(answer.strip()) or re.match(
        r"^\W*(NO|无)\W*$", answer.strip().splitlines()[0] if answer.strip() else ""
    ):
        return Extraction([], reason)
    try:
        found = parse_json_answer(task, answer)
        found.reason = found.reason or reason
        return found
    except ParseError:
        pass
    if task == "ee":
        events, malformed = _events(answer)
        if events:
            return Extraction(events, reason, malformed)
    rows = _table_rows(answer)
    if rows:
        table = _from_table(task, rows, schema)
        if table.items:
            table.reason = reason
            return table
    out = Extraction(reason=reason)
    bodies = TUPLE.findall(answer)
    for body in bodies:
        item = (_ner_tuple if task == "ner" else _re_tuple)(_split(body), schema) if task != "ee" else None
        if item is None:
            out.malformed += 1
        elif item not in out.items:
            out.items.append(item)
    if not out.items:
        raise ParseError(f"no {task} answer found: expected {FORMAT_HINT[task]} or NO")
    return out


FORMAT_HINT = {
    "ner": "[(entity type, entity span), ...]",
    "re": "[(head entity, relation type, tail entity), ...]",
    "ee": "[{Trigger Type: ..., Trigger Word: ..., Arguments: [(role, argument), ...]}, ...]",
}


# ---------------------------------------------------------------- answer text (the simplification S)


def answer_text(task: str, items: list[Any], *, mode: str = "text", reason: str | None = None) -> str:
    """Items in the answer format of ``mode``: the paper's tuples (``NO`` when empty) or JSON
    (with ``reason`` first when given: the form of a team expert's json answer)."""
    if mode == "json":
        key = {"ner": "entities", "re": "triples", "ee": "events"}[task]
        if task == "ner":
            rows: list[Any] = [{"type": e.type, "text": e.text} for e in items]
        elif task == "re":
            rows = [{"head": t.head, "relation": t.relation, "tail": t.tail} for t in items]
        else:
            rows = [
                {
                    "event_type": e.type,
                    "trigger": e.trigger,
                    "arguments": [{"role": a.role, "text": a.text} for a in e.arguments],
                }
                for e in items
            ]
        head = {} if reason is None else {"reason": reason}
        return json.dumps({**head, key: rows}, ensure_ascii=False)
    if not items:
        return "NO"
    if task == "ner":
        return "[" + ", ".join(f"({e.type}, {e.text})" for e in items) + "]"
    if task == "re":
        return "[" + ", ".join(f"({t.head}, {t.relation}, {t.tail})" for t in items) + "]"
    parts = []
    for e in items:
        arguments = ", ".join(f"({a.role}, {a.text})" for a in e.arguments)
        parts.append(f"{{Trigger Type: {e.type}, Trigger Word: {e.trigger}, Arguments: [{arguments}]}}")
    return "[" + ", ".join(parts) + "]"


def schema_filter(task: str, items: list[Any], schema: Schema) -> tuple[list[Any], int]:
    """``(kept, dropped)``: items whose types are in ``schema`` (an event keeps only roles of its
    type; an event left with a known type stays), duplicates removed; dropped counts items and roles."""
    kept: list[Any] = []
    dropped = 0
    for item in items:
        if task == "ner":
            ok = item.type in schema.entity_types
        elif task == "re":
            ok = item.relation in schema.relations
        else:
            ok = item.type in schema.events
            if ok:
                roles = schema.events[item.type]
                arguments = tuple(a for a in item.arguments if a.role in roles)
                dropped += len(item.arguments) - len(arguments)
                item = Event(item.type, item.trigger, arguments)
        if not ok:
            dropped += 1
        elif item not in kept:
            kept.append(item)
    return kept, dropped


def _spans(task: str, item: Any) -> list[str]:
    if task == "ner":
        return [item.text]
    if task == "re":
        return [item.head, item.tail]
    return [item.trigger, *(a.text for a in item.arguments)]


def ungrounded(task: str, items: list[Any], text: str) -> int:
    """How many of ``items`` hold a span that does not occur in ``text`` (after the scorer's
    normalisation of case and whitespace). A schema cannot bound this, so such items are counted
    (and score as false positives), not dropped."""
    sentence = norm(text)
    return sum(any(norm(span) not in sentence for span in _spans(task, item)) for item in items)
