"""Gold and predicted annotations as character spans, and a dataset's schema.

Every reader yields :class:`Sentence` objects: the text (Chinese kept as characters), the task
(``ner`` | ``re`` | ``ee``), the language and the gold :class:`Entity` / :class:`Triple` /
:class:`Event` items with character offsets ``[start, end)`` into ``text``. A :class:`Schema` holds
the entity types, the relation types with their head and tail types, and the event types with
their argument roles; bundled schemas live in ``pipelines/kgc/schemas/<name>.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

Task = Literal["ner", "re", "ee"]
TASKS: tuple[Task, ...] = ("ner", "re", "ee")
SCHEMA_DIR = Path(__file__).parent / "schemas"


@dataclass(frozen=True)
class Entity:
    type: str
    text: str
    start: int = -1
    end: int = -1


@dataclass(frozen=True)
class Triple:
    """``(head, relation, tail)``; ``qualifiers`` keeps the extra slots of a complex object (DuIE)."""

    head: str
    relation: str
    tail: str
    qualifiers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Argument:
    """``aliases``: other forms of a gold argument that count as it (DuEE's ``alias`` field)."""

    role: str
    text: str
    start: int = -1
    end: int = -1
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Event:
    type: str
    trigger: str
    arguments: tuple[Argument, ...] = ()
    start: int = -1
    end: int = -1


@dataclass
class Sentence:
    """One annotated sentence; ``id`` is ``<dataset>:<line or index>``; ``matching``: how its items
    are scored (``offsets`` | ``text`` | ``word``, set by the reader; see :mod:`pipelines.kgc.matching`)."""

    id: str
    dataset: str
    task: Task
    language: str
    text: str
    entities: list[Entity] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    matching: str = "text"

    def gold(self) -> list[Any]:
        return {"ner": self.entities, "re": self.triples, "ee": self.events}[self.task]


@dataclass(frozen=True)
class Schema:
    """Types of one dataset. ``relations``: name -> (head type, tail type); ``events``: type -> roles;
    ``aliases``: label spellings in the files mapped to schema names (e.g. MSRA ``NR`` -> ``PER``,
    NYT11-HRL ``place lived`` -> ``/people/person/place_lived``)."""

    name: str
    task: Task
    language: str
    entity_types: tuple[str, ...] = ()
    relations: dict[str, tuple[str, str]] = field(default_factory=dict)
    events: dict[str, tuple[str, ...]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def types(self) -> list[str]:
        """The constrained type list of the task (entity types, relation names or event types)."""
        return list({"ner": self.entity_types, "re": self.relations, "ee": self.events}[self.task])

    def label(self, raw: str) -> str:
        """The schema's name for a label as a file spells it: the label itself, its alias, or the
        alias or name it equals ignoring case, spaces, ``_`` and ``-`` (``Place_Lived``); else ``raw``."""
        if raw in self.aliases:
            return self.aliases[raw]
        return self._loose_labels.get(_loose(raw), raw)

    @cached_property
    def _loose_labels(self) -> dict[str, str]:
        names = [*self.entity_types, *self.relations, *self.events, *(r for rs in self.events.values() for r in rs)]
        table = {_loose(name): name for name in names}
        table.update({_loose(alias): name for alias, name in self.aliases.items()})
        return table

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task,
            "language": self.language,
            "entity_types": list(self.entity_types),
            "relations": {k: list(v) for k, v in self.relations.items()},
            "events": {k: list(v) for k, v in self.events.items()},
            "aliases": dict(self.aliases),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Schema:
        return cls(
            name=data["name"],
            task=data["task"],
            language=data["language"],
            entity_types=tuple(data.get("entity_types", ())),
            relations={k: (v[0], v[1]) for k, v in data.get("relations", {}).items()},
            events={k: tuple(v) for k, v in data.get("events", {}).items()},
            aliases=dict(data.get("aliases", {})),
        )


def _loose(label: str) -> str:
    return " ".join(str(label).replace("_", " ").replace("-", " ").split()).casefold()


def load_schema(name_or_path: str | Path) -> Schema:
    """A bundled schema by name (``conllpp``, ``nyt11_hrl``, ...) or a JSON file in the same form."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SCHEMA_DIR / f"{name_or_path}.json"
    if not path.exists():
        have = ", ".join(sorted(p.stem for p in SCHEMA_DIR.glob("*.json")))
        raise FileNotFoundError(f"schema {name_or_path!r} not found ({path}); bundled schemas: {have}")
    return Schema.from_dict(json.loads(path.read_text(encoding="utf-8")))
