"""Strict micro-F1 for NER, RE and EE, overall and per type.

An item is a key; a sentence's gold and predicted items are sets of keys (duplicates count once);
true positives are the keys in both. Counts add up over sentences (micro averaging); an empty
prediction adds gold items only (recall 0, no error), and 0/0 is 0.

- NER: ``(type, span)``; span = character offsets when both sides have them (BIO input, as seqeval
  scores), else the normalised text.
- RE: ``(head, relation, tail)`` on normalised text (the main triple; DuIE qualifiers are kept in
  the data but not scored).
- EE: triggers ``("trigger", event type, trigger)`` and arguments ``("argument", event type, role,
  argument)``, pooled for the headline F1 and also reported apart (``trigger``, ``argument``).

Normalisation (:func:`norm`): whitespace runs become one space, ends are stripped, case is folded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pipelines.kgc.schema import Entity, Event, Triple


def norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


@dataclass
class Counts:
    tp: int = 0
    pred: int = 0
    gold: int = 0

    def add(self, gold: set, pred: set) -> None:
        self.tp += len(gold & pred)
        self.pred += len(pred)
        self.gold += len(gold)

    @property
    def precision(self) -> float:
        return self.tp / self.pred if self.pred else 0.0

    @property
    def recall(self) -> float:
        return self.tp / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def to_dict(self) -> dict[str, float]:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "tp": self.tp,
            "pred": self.pred,
            "gold": self.gold,
        }


def item_keys(task: str, items: Iterable[Any], *, offsets: bool = False) -> set[tuple]:
    """The scored keys of ``items`` (Entity / Triple / Event) for ``task``."""
    keys: set[tuple] = set()
    for item in items:
        if task == "ner":
            assert isinstance(item, Entity)
            keys.add(("entity", item.type, (item.start, item.end) if offsets else norm(item.text)))
        elif task == "re":
            assert isinstance(item, Triple)
            keys.add(("triple", norm(item.head), item.relation, norm(item.tail)))
        elif task == "ee":
            assert isinstance(item, Event)
            keys.add(("trigger", item.type, norm(item.trigger)))
            keys.update(("argument", item.type, a.role, norm(a.text)) for a in item.arguments)
        else:
            raise ValueError(f"unknown task {task!r}; use ner, re or ee")
    return keys


def _type_of(key: tuple) -> str:
    return key[2] if key[0] == "triple" else key[1]


def score(task: str, pairs: Iterable[tuple[Iterable[Any], Iterable[Any]]], *, offsets: bool = False) -> dict[str, Any]:
    """Micro P/R/F1 over ``(gold items, predicted items)`` pairs, one pair per sentence.

    Returns ``{"overall", "per_type": {type: ...}, "sentences"}`` and for EE also ``trigger`` and
    ``argument``; each score is :meth:`Counts.to_dict`.
    """
    overall, parts = Counts(), defaultdict(Counts)
    per_type: dict[str, Counts] = defaultdict(Counts)
    sentences = 0
    for gold_items, pred_items in pairs:
        sentences += 1
        gold, pred = item_keys(task, gold_items, offsets=offsets), item_keys(task, pred_items, offsets=offsets)
        overall.add(gold, pred)
        for kind in ("trigger", "argument") if task == "ee" else ():
            parts[kind].add({k for k in gold if k[0] == kind}, {k for k in pred if k[0] == kind})
        for name in {_type_of(k) for k in gold | pred}:
            per_type[name].add({k for k in gold if _type_of(k) == name}, {k for k in pred if _type_of(k) == name})
    result: dict[str, Any] = {
        "overall": overall.to_dict(),
        "per_type": {name: per_type[name].to_dict() for name in sorted(per_type)},
        "sentences": sentences,
    }
    for kind in ("trigger", "argument") if task == "ee" else ():
        result[kind] = parts[kind].to_dict()
    return result


def _mention(key: tuple) -> str:
    return str(key[-1])


def corrections(
    task: str, gold_items: Iterable[Any], rounds: list[list[Any]], replicas: list[list[str]]
) -> dict[str, int]:
    """What changed between consecutive rounds of one expert.

    ``rounds[t]``: its items in round t; ``replicas[t]``: the other experts' replica texts of round
    t. An item *appeared* in round t when it was not in round t-1 (``from_peer`` when its mention
    occurs in a peer's replica of round t-1), *disappeared* when it was there and is not any more;
    ``*_correct`` count those that are gold items.
    """
    gold = item_keys(task, gold_items)
    out = {"appeared": 0, "appeared_correct": 0, "appeared_from_peer": 0, "disappeared": 0, "disappeared_correct": 0}
    for t in range(1, len(rounds)):
        before, after = item_keys(task, rounds[t - 1]), item_keys(task, rounds[t])
        peers = " ".join(replicas[t - 1]).casefold()
        appeared, gone = after - before, before - after
        out["appeared"] += len(appeared)
        out["appeared_correct"] += len(appeared & gold)
        out["appeared_from_peer"] += sum(_mention(k) in peers for k in appeared)
        out["disappeared"] += len(gone)
        out["disappeared_correct"] += len(gone & gold)
    return out
