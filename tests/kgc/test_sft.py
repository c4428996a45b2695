"""SFT rows from final answers: which extractions are kept (correct vs whole answer), when a
sentence gives a row, and the row's target in both output modes."""

from __future__ import annotations

import json

import pytest

from pipelines.kgc.schema import Argument, Entity, Event, Sentence, Triple
from pipelines.kgc.sft import correct_items, sft_row_for
from pipelines.kgc.team import ExpertRound, TeamResult

PROMPT = [{"role": "system", "content": "You are an excellent expert."}, {"role": "user", "content": "Text: x"}]


def test_correct_items_keep_only_gold_extractions():
    gold = [Entity("PER", "Lionel Messi", 0, 12), Entity("LOC", "Rosario", 25, 32)]
    answer = [Entity("PER", "lionel  messi"), Entity("PER", "Rosario"), Entity("LOC", "Rosario"), Entity("LOC", "x")]
    assert correct_items("ner", gold, answer) == [Entity("PER", "lionel  messi"), Entity("LOC", "Rosario")]
    gold_re = [Triple("Messi", "born_in", "Rosario")]
    answer_re = [Triple("messi", "born_in", "Rosario"), Triple("Rosario", "born_in", "Messi")]
    assert correct_items("re", gold_re, answer_re) == [Triple("messi", "born_in", "Rosario")]
    gold_ee = [Event("Life:Be-Born", "born", (Argument("Person", "Messi"), Argument("Time", "1987")))]
    answer_ee = [
        Event("Life:Be-Born", "born", (Argument("Person", "Messi"), Argument("Place", "Rosario"))),
        Event("Conflict:Attack", "born", (Argument("Person", "Messi"),)),  # wrong type: not kept
    ]
    assert correct_items("ee", gold_ee, answer_ee) == [Event("Life:Be-Born", "born", (Argument("Person", "Messi"),))]


def _result(items, prompt=PROMPT):
    first = ExpertRound("ner_0", "ner", "conllpp", 0, items=[], prompt=prompt)
    final = ExpertRound("ner_0", "ner", "conllpp", 1, items=items)
    return TeamResult("conllpp:1", "ner_0", rounds=[{"ner_0": first}, {"ner_0": final}])


def _sentence(gold):
    return Sentence("conllpp:1", "conllpp", "ner", "en", "Lionel Messi was born in Rosario .", entities=gold)


GOLD = [Entity("PER", "Lionel Messi"), Entity("LOC", "Rosario")]
HALF = [Entity("PER", "Lionel Messi"), Entity("ORG", "born")]  # one right, one wrong: F1 0.5


def test_keep_correct_writes_only_the_correct_extractions():
    row = sft_row_for(_sentence(GOLD), _result(HALF), min_f1=0.0, f1=0.5, mode="json", keep="correct")
    assert row["messages"][:2] == PROMPT
    target = json.loads(row["messages"][-1]["content"])
    assert target == {"reason": "", "entities": [{"type": "PER", "text": "Lionel Messi"}]}
    assert list(target) == ["reason", "entities"]  # the order the team's answer schema asks for
    assert row["meta"]["kept_items"] == 1 and row["meta"]["answer_items"] == 2 and row["meta"]["keep"] == "correct"
    text = sft_row_for(_sentence(GOLD), _result(HALF), min_f1=0.0, f1=0.5, mode="text", keep="correct")
    assert text["messages"][-1]["content"] == "[(PER, Lionel Messi)]"


def test_keep_answer_writes_the_whole_answer_above_min_f1():
    row = sft_row_for(_sentence(GOLD), _result(HALF), min_f1=0.5, f1=0.5, mode="text", keep="answer")
    assert row["messages"][-1]["content"] == "[(PER, Lionel Messi), (ORG, born)]"
    assert sft_row_for(_sentence(GOLD), _result(HALF), min_f1=0.6, f1=0.5, mode="text", keep="answer") is None
    assert sft_row_for(_sentence(GOLD), _result(HALF), min_f1=0.6, f1=0.5, mode="text", keep="correct") is None


@pytest.mark.parametrize("keep", ["correct", "answer"])
def test_no_row_without_a_correct_extraction_or_a_prompt(keep):
    wrong = [Entity("ORG", "born")]
    assert sft_row_for(_sentence(GOLD), _result([]), min_f1=0.0, f1=0.0, mode="json", keep=keep) is None
    assert sft_row_for(_sentence(GOLD), _result(HALF, prompt=[]), min_f1=0.0, f1=0.5, mode="json", keep=keep) is None
    got = sft_row_for(_sentence(GOLD), _result(wrong), min_f1=0.0, f1=0.0, mode="json", keep=keep)
    assert (got is None) == (keep == "correct")  # keep: answer with min_f1 0 writes even a wrong answer


def test_empty_gold_gives_a_row_only_for_an_empty_answer():
    row = sft_row_for(_sentence([]), _result([]), min_f1=0.0, f1=0.0, mode="text", keep="correct")
    assert row["messages"][-1]["content"] == "NO"
    assert sft_row_for(_sentence([]), _result(HALF), min_f1=0.0, f1=0.0, mode="text", keep="correct") is None
