"""Strict micro-F1 for NER, RE and EE, overall and per type.

A sentence's gold and predicted items become keys (:mod:`pipelines.kgc.matching`: by character
offsets where the dataset has them, by text otherwise, word-level for DuEE); true positives are the
keys in both (word-level: the sum of the matched scores). Counts add up over sentences (micro
averaging); an empty prediction adds gold items only (recall 0, no error), and 0/0 is 0.

- NER: ``(type, span)`` (equals seqeval on BIO files when scored by offsets).
- RE: ``(head, relation, tail)`` on normalised text (the main triple; DuIE qualifiers are kept in
  the data but not scored).
- EE: triggers ``(event type, trigger)`` and arguments ``(event type, role, argument)``, reported
  apart (``trigger``, ``argument``); the headline (``overall``, ``per_type``) is the argument
  score, as the papers' EE F1 (an argument counts only with its event type and role right).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pipelines.kgc.matching import keys, norm, word_items, word_matches

__all__ = ["Counts", "corrections", "item_keys", "norm", "score", "score_sentence"]


@dataclass
class Counts:
    tp: float = 0  # a float under word-level matching
    pred: int = 0
    gold: int = 0

    def merge(self, other: Counts) -> None:
        self.tp += other.tp
        self.pred += other.pred
        self.gold += other.gold

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


def item_keys(task: str, items: Iterable[Any]) -> set[tuple]:
    """The text keys of ``items`` (Entity / Triple / Event): what corrections and SFT filtering compare."""
    return keys(task, items)


def _type_of(key: tuple) -> str:
    return key[2] if key[0] == "triple" else key[1]


def _headline(task: str, kind: str) -> bool:
    return task != "ee" or kind == "argument"


def _sentence_counts(task: str, gold_items, pred_items, text: str | None, matching: str):
    """``{(kind, type): Counts}`` of one sentence (kind: entity | triple | trigger | argument)."""
    out: dict[tuple[str, str], Counts] = defaultdict(Counts)
    if matching == "word" and task == "ee":
        gold, pred = word_items(gold_items), word_items(pred_items)
        for kind, group, _ in gold:
            out[(kind, group[0])].gold += 1
        for kind, group, _ in pred:
            out[(kind, group[0])].pred += 1
        for _, j, value in word_matches(gold, pred):
            out[(pred[j][0], pred[j][1][0])].tp += value
        return out
    gold = keys(task, gold_items, sentence=text, matching=matching)
    pred = keys(task, pred_items, sentence=text, matching=matching)
    for key in gold | pred:
        counts = out[(key[0], _type_of(key))]
        counts.gold += key in gold
        counts.pred += key in pred
        counts.tp += key in gold and key in pred
    return out


def score(task: str, pairs: Iterable[tuple], *, matching: str = "text") -> dict[str, Any]:
    """Micro P/R/F1 over one ``(gold items, predicted items[, sentence text])`` per sentence.

    ``matching``: ``offsets`` (needs the sentence text to place answers without offsets), ``text``
    or ``word`` (EE only; see :mod:`pipelines.kgc.matching`). Returns ``{"overall", "per_type":
    {type: ...}, "sentences", "matching"}`` and for EE also ``trigger`` and ``argument``; each
    score is :meth:`Counts.to_dict`.
    """
    overall, parts = Counts(), defaultdict(Counts)
    per_type: dict[str, Counts] = defaultdict(Counts)
    sentences = 0
    for pair in pairs:
        gold_items, pred_items, text = (*pair, None)[:3]
        sentences += 1
        for (kind, name), counts in _sentence_counts(task, gold_items, pred_items, text, matching).items():
            parts[kind].merge(counts)
            if _headline(task, kind):
                overall.merge(counts)
                per_type[name].merge(counts)
    result: dict[str, Any] = {
        "overall": overall.to_dict(),
        "per_type": {name: per_type[name].to_dict() for name in sorted(per_type)},
        "sentences": sentences,
        "matching": matching,
    }
    for kind in ("trigger", "argument") if task == "ee" else ():
        result[kind] = parts[kind].to_dict()
    return result


def score_sentence(sentence: Any, items: Iterable[Any]) -> dict[str, Any]:
    """:func:`score` of one :class:`Sentence` against ``items``, under the sentence's own matching."""
    return score(sentence.task, [(sentence.gold(), list(items), sentence.text)], matching=sentence.matching)


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
