"""Strict micro-F1: NER agrees with seqeval on BIO input; RE and EE on hand-worked cases."""

from __future__ import annotations

import random

import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

from pipelines.kgc.datasets.base import token_offsets
from pipelines.kgc.datasets.bio import bio_chunks
from pipelines.kgc.schema import Argument, Entity, Event, Triple
from pipelines.kgc.scoring import score

TAGS = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


def entities(tokens, tags):
    offsets = token_offsets(tokens, " ")
    chunks, _ = bio_chunks(tags)
    text = " ".join(tokens)
    return [Entity(t, text[offsets[a][0] : offsets[b - 1][1]], offsets[a][0], offsets[b - 1][1]) for t, a, b in chunks]


def test_ner_agrees_with_seqeval_on_bio_input():
    rng = random.Random(7)
    gold_tags, pred_tags = [], []
    for _ in range(200):
        n = rng.randint(1, 12)
        gold = [rng.choice(TAGS) for _ in range(n)]
        pred = [g if rng.random() < 0.7 else rng.choice(TAGS) for g in gold]  # broken BIO included
        gold_tags.append(gold)
        pred_tags.append(pred)
    pairs = []
    for gold, pred in zip(gold_tags, pred_tags, strict=True):
        tokens = [f"w{i}" for i in range(len(gold))]
        pairs.append((entities(tokens, gold), entities(tokens, pred)))
    ours = score("ner", pairs, offsets=True)
    assert ours["overall"]["f1"] == pytest.approx(f1_score(gold_tags, pred_tags))
    assert ours["overall"]["precision"] == pytest.approx(precision_score(gold_tags, pred_tags))
    assert ours["overall"]["recall"] == pytest.approx(recall_score(gold_tags, pred_tags))
    report = classification_report(gold_tags, pred_tags, output_dict=True)
    for kind in ("PER", "LOC", "ORG"):
        assert ours["per_type"][kind]["f1"] == pytest.approx(report[kind]["f1-score"])
        assert ours["per_type"][kind]["gold"] == report[kind]["support"]
    assert 0.3 < ours["overall"]["f1"] < 0.95  # a real mix of hits and misses


def test_ner_text_keys_duplicates_once_and_empty_is_zero():
    gold = [Entity("PER", "Messi"), Entity("LOC", "Rosario")]
    result = score("ner", [(gold, [Entity("PER", "messi "), Entity("PER", "Messi"), Entity("LOC", "Argentina")])])
    assert (result["overall"]["tp"], result["overall"]["pred"], result["overall"]["gold"]) == (1, 2, 2)
    assert result["overall"]["f1"] == pytest.approx(0.5)
    empty = score("ner", [(gold, [])])
    assert empty["overall"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "tp": 0, "pred": 0, "gold": 2}
    assert score("ner", [])["overall"]["f1"] == 0.0


def test_re_hand_worked():
    # sentence 1: 2 gold, 3 predicted (one right, one wrong relation, one duplicate of the right one)
    g1 = [Triple("Lionel Messi", "per:date_of_birth", "1987"), Triple("Lionel Messi", "per:city_of_birth", "Rosario")]
    p1 = [
        Triple("lionel  messi", "per:date_of_birth", "1987"),
        Triple("Lionel Messi", "per:origin", "Rosario"),
        Triple("Lionel Messi", "per:date_of_birth", "1987 "),
    ]
    # sentence 2: 1 gold, nothing predicted
    g2 = [Triple("Paris", "capital_of", "France")]
    result = score("re", [(g1, p1), (g2, [])])
    assert (result["overall"]["tp"], result["overall"]["pred"], result["overall"]["gold"]) == (1, 2, 3)
    assert result["overall"]["precision"] == pytest.approx(1 / 2)
    assert result["overall"]["recall"] == pytest.approx(1 / 3)
    assert result["overall"]["f1"] == pytest.approx(2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))
    assert result["per_type"]["per:origin"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "tp": 0,
        "pred": 1,
        "gold": 0,
    }
    assert result["per_type"]["per:date_of_birth"]["f1"] == 1.0


def test_ee_hand_worked_triggers_and_arguments():
    gold = [
        Event(
            "Life:Be-Born",
            "Born",
            (Argument("Person", "Lionel Messi"), Argument("Place", "Rosario"), Argument("Time", "1987")),
        )
    ]
    # right trigger; Person right, Place right, Time missing, one wrong role
    pred = [
        Event(
            "Life:Be-Born",
            "born",
            (Argument("Person", "Lionel Messi"), Argument("Place", "Rosario"), Argument("Agent", "1987")),
        )
    ]
    result = score("ee", [(gold, pred)])
    assert result["trigger"]["f1"] == 1.0
    assert (result["argument"]["tp"], result["argument"]["pred"], result["argument"]["gold"]) == (2, 3, 3)
    assert result["overall"]["tp"] == 3 and result["overall"]["pred"] == 4 and result["overall"]["gold"] == 4
    assert result["overall"]["f1"] == pytest.approx(0.75)
    wrong_type = [Event("Life:Die", "Born", (Argument("Person", "Lionel Messi"),))]
    assert score("ee", [(gold, wrong_type)])["overall"]["tp"] == 0


def test_corrections_count_appeared_and_disappeared_items():
    from pipelines.kgc.scoring import corrections

    gold = [Entity("PER", "Messi"), Entity("DATE", "1987")]
    rounds = [
        [Entity("PER", "Messi"), Entity("LOC", "Moon")],
        [Entity("PER", "Messi"), Entity("DATE", "1987")],
        [Entity("DATE", "1987")],
    ]
    replicas = [["(Messi, per:date_of_birth, 1987)"], ["NO"], ["NO"]]
    assert corrections("ner", gold, rounds, replicas) == {
        "appeared": 1,  # DATE 1987 in round 1, seen in a peer's replica of round 0
        "appeared_correct": 1,
        "appeared_from_peer": 1,
        "disappeared": 2,  # Moon (wrong) in round 1, Messi (gold) in round 2
        "disappeared_correct": 1,
    }
