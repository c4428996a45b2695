"""Strict micro-F1: NER agrees with seqeval on BIO input; RE, EE and DuEE's word-level matching on
hand-worked cases; answers without offsets placed at every occurrence of their text."""

from __future__ import annotations

import random

import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

from pipelines.kgc.datasets.base import token_offsets
from pipelines.kgc.datasets.bio import bio_chunks
from pipelines.kgc.matching import char_f1, occurrences
from pipelines.kgc.schema import Argument, Entity, Event, Sentence, Triple
from pipelines.kgc.scoring import score, score_sentence

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
        tokens = ["w"] * len(gold)  # one repeated word: only positions tell the mentions apart
        pairs.append((entities(tokens, gold), entities(tokens, pred), " ".join(tokens)))
    ours = score("ner", pairs, matching="offsets")
    assert ours["overall"]["f1"] == pytest.approx(f1_score(gold_tags, pred_tags))
    assert ours["overall"]["precision"] == pytest.approx(precision_score(gold_tags, pred_tags))
    assert ours["overall"]["recall"] == pytest.approx(recall_score(gold_tags, pred_tags))
    report = classification_report(gold_tags, pred_tags, output_dict=True)
    for kind in ("PER", "LOC", "ORG"):
        assert ours["per_type"][kind]["f1"] == pytest.approx(report[kind]["f1-score"])
        assert ours["per_type"][kind]["gold"] == report[kind]["support"]
    assert 0.3 < ours["overall"]["f1"] < 0.95  # a real mix of hits and misses
    by_text = score("ner", [p[:2] for p in pairs], matching="text")
    assert by_text["overall"]["gold"] < ours["overall"]["gold"]  # text keys merge the repeated mentions


def test_ner_text_keys_duplicates_once_and_empty_is_zero():
    gold = [Entity("PER", "Messi"), Entity("LOC", "Rosario")]
    result = score("ner", [(gold, [Entity("PER", "messi "), Entity("PER", "Messi"), Entity("LOC", "Argentina")])])
    assert (result["overall"]["tp"], result["overall"]["pred"], result["overall"]["gold"]) == (1, 2, 2)
    assert result["overall"]["f1"] == pytest.approx(0.5) and result["matching"] == "text"
    empty = score("ner", [(gold, [])])
    assert empty["overall"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "tp": 0, "pred": 0, "gold": 2}
    assert score("ner", [])["overall"]["f1"] == 0.0


def test_answers_without_offsets_stand_for_every_occurrence():
    text = "Paris Hilton flew from Paris to Lyon , then back to Paris ."
    gold = [Entity("PER", "Paris Hilton", 0, 12), Entity("LOC", "Paris", 23, 28), Entity("LOC", "Lyon", 32, 36),
            Entity("LOC", "Paris", 52, 57)]  # fmt: skip
    assert occurrences(text, "Paris") == [(0, 5), (23, 28), (52, 57)] and occurrences(text, "Pari") == []
    assert occurrences(text, "paris  hilton") == [(0, 12)]  # case and spacing ignored when nothing matches exactly
    # (LOC, Paris) stands for both LOC mentions; its occurrence inside the predicted "Paris Hilton" is no mention
    answer = [Entity("PER", "Paris Hilton"), Entity("LOC", "Paris"), Entity("LOC", "Lyons"), Entity("ORG", "Lyon")]
    result = score("ner", [(gold, answer, text)], matching="offsets")["overall"]
    assert (result["tp"], result["pred"], result["gold"]) == (3, 5, 4)  # 3 placed hits; Lyons unplaced; ORG Lyon
    alone = score("ner", [(gold, [Entity("LOC", "Paris")], text)], matching="offsets")["overall"]
    assert (alone["tp"], alone["pred"]) == (2, 3)  # without Paris Hilton predicted, its "Paris" is a wrong LOC
    old = score("ner", [(gold, answer)], matching="text")["overall"]
    assert (old["tp"], old["gold"]) == (2, 3)  # by text: the two Paris mentions were one item


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


def test_ee_triggers_and_arguments_apart_and_the_headline_is_arguments():
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
    assert result["overall"] == result["argument"]  # the headline: argument F1, not triggers and arguments pooled
    assert result["per_type"]["Life:Be-Born"]["f1"] == pytest.approx(2 / 3)
    wrong_type = [Event("Life:Die", "Born", (Argument("Person", "Lionel Messi"),))]
    assert score("ee", [(gold, wrong_type)])["overall"]["tp"] == 0


def test_ee_by_offsets_counts_each_mention():
    text = "Rebels attacked Homs and troops attacked Homs ."
    gold = [Event("Conflict:Attack", "attacked", (Argument("Attacker", "Rebels", 0, 6),
                                                  Argument("Target", "Homs", 16, 20)), 7, 15),
            Event("Conflict:Attack", "attacked", (Argument("Attacker", "troops", 25, 31),
                                                  Argument("Target", "Homs", 41, 45)), 32, 40)]  # fmt: skip
    answer = [Event("Conflict:Attack", "attacked", (Argument("Attacker", "Rebels"), Argument("Target", "Homs")))]
    result = score("ee", [(gold, answer, text)], matching="offsets")
    assert (result["trigger"]["tp"], result["trigger"]["pred"], result["trigger"]["gold"]) == (2, 2, 2)
    assert (result["argument"]["tp"], result["argument"]["pred"], result["argument"]["gold"]) == (3, 3, 4)
    by_text = score("ee", [(gold, answer)], matching="text")
    assert (by_text["trigger"]["gold"], by_text["argument"]["gold"]) == (1, 3)  # what text keys made of it


def test_word_level_matching_hand_worked():
    assert char_f1("湖人", "湖人队") == pytest.approx(0.8) and char_f1("ABC", "abc") == 1.0
    assert char_f1("科技公司", "某科技公司") == pytest.approx(8 / 9) and char_f1("x", "y") == 0.0
    win = "竞赛行为-胜负"
    gold = [
        Event(win, "击败", (Argument("时间", "昨晚"), Argument("胜者", "湖人队"), Argument("败者", "勇士队"))),
        Event("竞赛行为-胜负", "击败", (Argument("时间", "昨晚"), Argument("胜者", "凯尔特人队"))),
        Event("组织关系-裁员", "裁员", (Argument("裁员人数", "约300人", aliases=("300人",)),)),
    ]
    pred = [
        Event(win, "击败", (Argument("胜者", "湖人"), Argument("胜者", "凯尔特人队"), Argument("败者", "勇士队"))),
        Event("竞赛行为-胜负", "击败了", (Argument("时间", "昨晚"),)),
        Event("组织关系-裁员", "裁员", (Argument("裁员人数", "300人"), Argument("裁员方", "公司"))),
    ]
    result = score("ee", [(gold, pred)], matching="word")
    # triggers: 击败 1.0 with one gold, 击败了 0.8 with the other (one gold is matched once); 裁员 1.0
    trigger = result["trigger"]
    assert trigger["tp"] == pytest.approx(2.8) and (trigger["pred"], trigger["gold"]) == (3, 3)
    # arguments: 凯尔特人队 1.0, 湖人 0.8, 勇士队 1.0, 昨晚 1.0 (the second gold 昨晚 unmatched),
    # 300人 1.0 by its alias, 公司 has no gold of its role
    argument = result["argument"]
    assert argument["tp"] == pytest.approx(4.8) and (argument["pred"], argument["gold"]) == (6, 6)
    assert result["overall"]["f1"] == pytest.approx(0.8) and result["matching"] == "word"


def test_score_sentence_uses_the_sentence_matching():
    text = "Bonn and Bonn"
    gold = [Entity("LOC", "Bonn", 0, 4), Entity("LOC", "Bonn", 9, 13)]
    sentence = Sentence("c:1", "c", "ner", "en", text, entities=gold, matching="offsets")
    assert score_sentence(sentence, [Entity("LOC", "Bonn")])["overall"]["tp"] == 2


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
