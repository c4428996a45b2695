"""The EE expert: template ``ee_expert.<lang>.j2``, answer ``[{Trigger Type: <type>, Trigger Word:
<word>, Arguments: [(role, argument), ...]}, ...]`` in text mode (a table ``| event type | trigger |
role | argument |`` too, one row per argument), :class:`EEAnswer` in json mode, where each event
type admits only its own roles."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from pipelines.kgc.agents.answer_bounds import AnswerBounds
from pipelines.kgc.agents.expert_role import ExpertRole, Extraction, choice, json_object
from pipelines.kgc.agents.reply_text import TUPLE, clean
from pipelines.kgc.schema import Argument, Event, Schema

EVENT_BLOCK = re.compile(r"\{([^{}]*)\}", re.S)
FIELD = r"\s*[:：]\s*([^,，}\n]+)"
TRIGGER_TYPE = re.compile(r"(?:trigger type|event type|事件类型|触发词类型)" + FIELD, re.I)
TRIGGER_WORD = re.compile(r"(?:trigger word|trigger|触发词)" + FIELD, re.I)
ARGUMENTS = re.compile(r"(?:arguments|论元)\s*[:：](.*)", re.I | re.S)


class EEArgument(BaseModel):
    role: str
    text: str


class EEEvent(BaseModel):
    event_type: str
    trigger: str
    arguments: list[EEArgument] = []


class EEAnswer(BaseModel):
    reason: str = ""
    events: list[EEEvent]


def _argument(body: str) -> Argument | None:
    match = re.match(r"\s*([^,，:：]+?)\s*[,，:：]\s*(.+)$", body, re.S)
    if not match:
        return None
    role, text = clean(match.group(1)), clean(match.group(2))
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
        events.append(Event(clean(kind.group(1)), clean(word.group(1)), tuple(arguments)))
    return events, malformed


class EEExpert(ExpertRole):
    task = "ee"
    template = "ee_expert"
    display = {"en": "EE expert agent", "zh": "事件抽取专家智能体"}
    answer_model = EEAnswer
    items_key = "events"
    example = (
        '{"reason": "...", "events": [{"event_type": "...", "trigger": "...", "arguments": [{"role": "...", '
        '"text": "..."}]}]}'
    )
    format_hint = "[{Trigger Type: ..., Trigger Word: ..., Arguments: [(role, argument), ...]}, ...]"

    def types_text(self, schema: Schema) -> str:
        """``[Event: [Role, ...], ...]``."""
        return "[" + ", ".join(f"{e}: [{', '.join(roles)}]" for e, roles in schema.events.items()) + "]"

    def item_schema(
        self, schema: Schema | None, types: list[str], *, span: dict, label: dict, bounds: AnswerBounds
    ) -> dict[str, Any]:
        """One ``anyOf`` branch per event type of ``schema``, each with its own roles (none: any label)."""

        def event(event_type: dict[str, Any], roles: list[str]) -> dict[str, Any]:
            argument = json_object({"role": choice(roles, label), "text": span})
            limit = bounds.arguments if roles or not types else 0
            arguments = {"type": "array", "items": argument, "maxItems": limit}
            return json_object({"event_type": event_type, "trigger": span, "arguments": arguments})

        if types:
            return {"anyOf": [event({"const": name}, list(schema.events[name])) for name in types]}
        return event(label, [])

    def from_model(self, answer: BaseModel) -> Extraction:
        items = [
            Event(
                e.event_type.strip(),
                e.trigger.strip(),
                tuple(Argument(a.role.strip(), a.text.strip()) for a in e.arguments),
            )
            for e in answer.events
        ]
        return Extraction(items, answer.reason.strip())

    def item_json(self, item: Event) -> dict[str, Any]:
        return {
            "event_type": item.type,
            "trigger": item.trigger,
            "arguments": [{"role": a.role, "text": a.text} for a in item.arguments],
        }

    def item_text(self, item: Event) -> str:
        arguments = ", ".join(f"({a.role}, {a.text})" for a in item.arguments)
        return f"{{Trigger Type: {item.type}, Trigger Word: {item.trigger}, Arguments: [{arguments}]}}"

    def fit(self, item: Event, schema: Schema) -> tuple[Event | None, int]:
        """The event with only its type's roles (the others counted), or None for an unknown type."""
        if item.type not in schema.events:
            return None, 0
        roles = schema.events[item.type]
        arguments = tuple(a for a in item.arguments if a.role in roles)
        return Event(item.type, item.trigger, arguments), len(item.arguments) - len(arguments)

    def spans(self, item: Event) -> list[str]:
        return [item.trigger, *(a.text for a in item.arguments)]

    def records(self, answer: str, reason: str) -> Extraction | None:
        """The paper's ``{Trigger Type: ..., Trigger Word: ..., Arguments: [...]}`` records."""
        events, malformed = _events(answer)
        return Extraction(events, reason, malformed) if events else None

    def tuple_item(self, parts: list[str], schema: Schema | None) -> None:
        """A bare tuple is no event (its arguments are read inside a record)."""
        return None

    def from_table(self, rows: list[list[str]], schema: Schema | None) -> Extraction:
        """Rows ``| type | trigger |`` or ``| type | trigger | role | argument |`` grouped into events."""
        out = Extraction()
        events: dict[tuple[str, str], list[Argument]] = {}
        for cells in rows:
            if len(cells) in (2, 4) and all(cells):
                arguments = events.setdefault((cells[0], cells[1]), [])
                if len(cells) == 4 and Argument(cells[2], cells[3]) not in arguments:
                    arguments.append(Argument(cells[2], cells[3]))
                continue
            out.malformed += 1
        out.items += [Event(k, w, tuple(a)) for (k, w), a in events.items()]
        return out


EE_EXPERT = EEExpert()
