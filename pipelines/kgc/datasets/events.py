"""Event-extraction files: ACE05 in the common OneIE JSON lines (``tokens``, ``entity_mentions``,
``event_mentions`` with ``trigger{start,end}`` and ``arguments[{entity_id, role}]``, token ends
exclusive) or DyGIE++ JSON lines (``sentences``, ``events`` with document-level token indices, ends
inclusive); DuEE 1.0 (``text``, ``event_list`` with ``trigger``, ``trigger_start_index`` and
``arguments[{argument, argument_start_index, role}]``) with its schema file (``event_type``,
``role_list``); an argument's ``alias`` forms are kept (the DuEE metric takes the best of them).

ACE05 gold is scored by character offsets, DuEE by the paper's word-level matching
(:mod:`pipelines.kgc.matching`). An event type or role outside the schema is counted
(``unknown_labels``) and left out; a trigger or
argument whose offsets do not hold its text is counted (``bad_spans``) and kept when its text
occurs elsewhere in the sentence (offsets then point there), else kept with offsets -1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.kgc.datasets.base import FileCounts, ReaderError, field_of, find_span, json_lines, token_offsets
from pipelines.kgc.schema import Argument, Event, Schema, Sentence


def _chars(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int | None, int | None]:
    """Character span of tokens ``[start, end)``; ``(None, None)`` when out of range."""
    if 0 <= start < end <= len(offsets):
        return offsets[start][0], offsets[end - 1][1]
    return None, None


def _event_type(raw: str, schema: Schema) -> str:
    label = schema.label(raw)
    if label not in schema.events and label.replace(".", ":") in schema.events:
        return label.replace(".", ":")
    return label


class _Builder:
    """Collects the events of one sentence, counting what does not fit the schema or the text."""

    def __init__(self, text: str, schema: Schema, counts: FileCounts, line: int):
        self.text, self.schema, self.counts, self.line = text, schema, counts, line
        self.events: list[Event] = []

    def span(self, what: str, start: int | None, end: int | None) -> tuple[int, int]:
        if start is not None and end is not None and self.text[start:end] == what:
            return start, end
        self.counts.note("bad_spans", self.line, f"{what!r} is not at offset {start} of the sentence")
        found = find_span(self.text, what)
        return found or (-1, -1)

    def add(
        self,
        raw_type: str,
        trigger: tuple[str, int | None, int | None],
        arguments: list[tuple],
    ) -> None:
        """``arguments``: ``(role, text, start, end[, aliases])`` each, as the file spells the role."""
        kind = _event_type(raw_type, self.schema)
        if kind not in self.schema.events:
            self.counts.note_unknown(
                raw_type, self.line, f"event type {raw_type!r} is not in schema {self.schema.name}"
            )
            return
        start, end = self.span(*trigger)
        kept = []
        for raw_role, text, a_start, a_end, *aliases in arguments:
            role = self.schema.label(raw_role)
            if role not in self.schema.events[kind]:
                self.counts.note_unknown(raw_role, self.line, f"role {raw_role!r} is not a role of {kind}")
                continue
            s, e = self.span(text, a_start, a_end)
            argument = Argument(role, text, s, e, tuple(aliases[0]) if aliases else ())
            if argument not in kept:
                kept.append(argument)
        self.events.append(Event(kind, trigger[0], tuple(kept), start, end))


def _sentence(
    name: str, sid: Any, schema: Schema, text: str, builder: _Builder, counts: FileCounts, matching: str
) -> Sentence:
    counts.sentences += 1
    counts.items += len(builder.events)
    return Sentence(f"{name}:{sid}", name, "ee", schema.language, text, events=builder.events, matching=matching)


def read_ace_oneie(
    path: Path | str, schema: Schema, *, dataset: str | None = None
) -> tuple[list[Sentence], FileCounts]:
    """OneIE rows; a DyGIE++ row (it has ``sentences``) is read by :func:`_dygie_rows`."""
    name, counts, sentences = dataset or schema.name, FileCounts(str(path)), []
    for line, row in json_lines(path):
        if "sentences" in row:
            sentences.extend(_dygie_rows(name, row, schema, counts, line, path))
            continue
        tokens = field_of(row, "tokens", path, line, list)
        text = " ".join(tokens)
        offsets = token_offsets(tokens, " ")
        mentions = {m.get("id"): m for m in row.get("entity_mentions", []) if isinstance(m, dict)}

        builder = _Builder(text, schema, counts, line)
        for event in field_of(row, "event_mentions", path, line, list):
            trigger = field_of(event, "trigger", path, line, dict)
            t_start, t_end = _chars(offsets, trigger.get("start", -1), trigger.get("end", -1))
            arguments = []
            for arg in event.get("arguments", []):
                mention = mentions.get(arg.get("entity_id"), {})
                a_start, a_end = _chars(offsets, mention.get("start", -1), mention.get("end", -1))
                arguments.append((field_of(arg, "role", path, line), field_of(arg, "text", path, line), a_start, a_end))
            builder.add(
                field_of(event, "event_type", path, line),
                (field_of(trigger, "text", path, line), t_start, t_end),
                arguments,
            )
        sid = row.get("sent_id", line)
        sentences.append(_sentence(name, sid, schema, text, builder, counts, "offsets"))
    return sentences, counts


def _dygie_rows(
    name: str, row: dict, schema: Schema, counts: FileCounts, line: int, path: Path | str
) -> list[Sentence]:
    documents = field_of(row, "sentences", path, line, list)
    events = row.get("events", [[] for _ in documents])
    if len(events) != len(documents):
        raise ReaderError(f"{path}:{line}: 'events' has {len(events)} entries for {len(documents)} sentences")
    out, first = [], 0
    for index, (tokens, sentence_events) in enumerate(zip(documents, events, strict=True)):
        text = " ".join(tokens)
        offsets = token_offsets(tokens, " ")

        builder = _Builder(text, schema, counts, line)
        for event in sentence_events:
            (trigger_index, kind), *args = event
            t_start, t_end = _chars(offsets, trigger_index - first, trigger_index - first + 1)
            arguments = [
                (role, " ".join(tokens[s - first : e - first + 1]), *_chars(offsets, s - first, e - first + 1))
                for s, e, role in args
            ]
            trigger = " ".join(tokens[trigger_index - first : trigger_index - first + 1])
            builder.add(kind, (trigger, t_start, t_end), arguments)
        sid = f"{row.get('doc_key', line)}:{index}"
        out.append(_sentence(name, sid, schema, text, builder, counts, "offsets"))
        first += len(tokens)
    return out


def read_duee_schema(path: Path | str, *, name: str = "duee1") -> Schema:
    """The DuEE schema file (JSON lines ``{"event_type", "role_list": [{"role"}], "class"}``)."""
    events: dict[str, tuple[str, ...]] = {}
    for line, row in json_lines(path):
        roles = field_of(row, "role_list", path, line, list)
        events[field_of(row, "event_type", path, line)] = tuple(field_of(r, "role", path, line) for r in roles)
    if not events:
        raise ReaderError(f"{path}:1: schema file holds no event types")
    return Schema(name=name, task="ee", language="zh", events=events)


def read_duee(path: Path | str, schema: Schema, *, dataset: str | None = None) -> tuple[list[Sentence], FileCounts]:
    name, counts, sentences = dataset or schema.name, FileCounts(str(path)), []
    for line, row in json_lines(path):
        text = field_of(row, "text", path, line)
        builder = _Builder(text, schema, counts, line)
        for event in row.get("event_list", []):
            trigger = field_of(event, "trigger", path, line)
            t_start = event.get("trigger_start_index")
            arguments = []
            for arg in event.get("arguments", []):
                value, a_start = field_of(arg, "argument", path, line), arg.get("argument_start_index")
                a_end = None if a_start is None else a_start + len(value)
                aliases = tuple(str(a) for a in arg.get("alias") or () if str(a) != value)
                arguments.append((field_of(arg, "role", path, line), value, a_start, a_end, aliases))
            t_end = None if t_start is None else t_start + len(trigger)
            builder.add(field_of(event, "event_type", path, line), (trigger, t_start, t_end), arguments)
        sentences.append(_sentence(name, row.get("id", line), schema, text, builder, counts, "word"))
    return sentences, counts
