"""The scorer on one file per dataset format, against a reference no one here wrote: seqeval for NER
(the file's own tag columns, read here without the project's reader), counts taken from the raw
JSON for RE, hand-worked counts for EE.

Real files (skipped with a message when ``../shared/data`` is absent): CoNLL++ dev, the NYT11-HRL
re-split validation set, the DuIE 2.0 sample. Formats not on this machine are small fixtures in
the published format, with the project's own sentences:

- ``msra_test_bio.txt``: MSRA as distributed in OYE93/Chinese-NLP-Corpus ``NER/MSRA/msra_test_bio.txt``
  (one character and its BIO tag per line, tab-separated, a blank line between sentences);
- ``nyt11_hrl_english.jsonl``: the NYT11-HRL re-split test file (Ding-Papa/Evaluating-filtering-coling24
  ``dataset/NYT11-HRL/new_test.json``: ``sentText`` with a leading and a trailing space,
  ``relationMentions`` with ``em1Text``, ``em2Text`` and plain-English labels such as ``place lived``);
- ``duee_dev.jsonl`` + ``duee_dev_schema.jsonl``: DuEE 1.0 dev rows (``text``, ``id``, ``event_list``
  of ``event_type``, ``trigger``, ``trigger_start_index``, ``arguments`` of ``argument_start_index``,
  ``role``, ``argument``, ``alias``, and ``class``) and schema rows (``event_type``, ``role_list``,
  ``id``, ``class``), as LIC2020 / PaddleNLP's DuEE baseline distribute them;
- ``ontonotes.bio``, ``tacred.json``, ``ace_oneie.jsonl``: as in test_datasets.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

from pipelines.kgc.datasets import DatasetConfig, load_dataset
from pipelines.kgc.schema import Argument, Entity, Event, Triple
from pipelines.kgc.scoring import item_keys, score

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).parent / "fixtures"
SHARED = Path(os.environ.get("EDUMAS_SHARED_DATA", ROOT.parent / "shared" / "data")) / "kgc"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (optional; set EDUMAS_SHARED_DATA to the folder)")
    return path


def load(fmt, path, **kw):
    return load_dataset(DatasetConfig(name=Path(path).stem, format=fmt, files=[str(path)], sample=None, **kw))


def raw_columns(path: Path) -> list[tuple[list[str], list[str]]]:
    """``(tokens, tags)`` per sentence straight from a column file (first and last column)."""
    out, tokens, tags = [], [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if not line.strip() or line.startswith(("-DOCSTART-", "#begin document", "#end document")):
            if tokens:
                out.append((tokens, tags))
            tokens, tags = [], []
            continue
        columns = line.split()
        tokens.append(columns[0])
        tags.append(columns[-1])
    return out


def perturbed(tags: list[str], index: int, types: list[str]) -> list[str]:
    """A deterministic system output: some entities dropped, retyped, widened, and a spurious one."""
    out = list(tags)
    starts = [i for i, t in enumerate(out) if t.startswith("B-")]
    if starts and index % 5 == 0:  # drop the first entity
        i = starts[0]
        out[i] = "O"
        for j in range(i + 1, len(out)):
            if not out[j].startswith("I-"):
                break
            out[j] = "O"
    if starts and index % 3 == 1:  # retype the last entity
        i = starts[-1]
        kind = out[i][2:]
        other = types[(types.index(kind) + 1) % len(types)] if kind in types else types[0]
        out[i] = f"B-{other}"
        for j in range(i + 1, len(out)):
            if out[j] != f"I-{kind}":
                break
            out[j] = f"I-{other}"
    if index % 7 == 2 and "O" in out:  # a spurious one-token entity
        out[out.index("O")] = f"B-{types[index % len(types)]}"
    return out


def _bio_against_seqeval(tmp_path: Path, fmt: str, path: Path, separator: str) -> dict:
    sentences = raw_columns(path)
    types = sorted({t[2:] for _, tags in sentences for t in tags if t != "O"})
    predicted = [perturbed(tags, i, types) for i, (_, tags) in enumerate(sentences)]
    system = tmp_path / f"system{path.suffix}"
    system.write_text("\n\n".join("\n".join(f"{w}{separator}{t}" for w, t in zip(tokens, tags, strict=True))
                                  for (tokens, _), tags in zip(sentences, predicted, strict=True)) + "\n",
                      encoding="utf-8")  # fmt: skip
    gold, pred = load(fmt, path), load(fmt, system)
    assert len(gold.sentences) == len(pred.sentences) == len(sentences)
    pairs = [(g.entities, p.entities, g.text) for g, p in zip(gold.sentences, pred.sentences, strict=True)]
    ours = score("ner", pairs, matching="offsets")
    gold_tags = [tags for _, tags in sentences]
    assert ours["overall"]["precision"] == pytest.approx(precision_score(gold_tags, predicted))
    assert ours["overall"]["recall"] == pytest.approx(recall_score(gold_tags, predicted))
    assert ours["overall"]["f1"] == pytest.approx(f1_score(gold_tags, predicted))
    report = classification_report(gold_tags, predicted, output_dict=True)
    for kind in types:
        assert ours["per_type"][kind]["f1"] == pytest.approx(report[kind]["f1-score"]), kind
        assert ours["per_type"][kind]["gold"] == report[kind]["support"], kind
    assert 0 < ours["overall"]["f1"] < 1
    return {"ours": ours, "gold": gold}


def test_conllpp_dev_by_offsets_equals_seqeval(tmp_path):
    path = _need(SHARED / "conllpp_dev.txt")
    found = _bio_against_seqeval(tmp_path, "conll", path, " ")
    sentences = found["gold"].sentences
    assert found["ours"]["overall"]["gold"] == 5942  # every B- tag of the file
    answers = [(s.entities, [Entity(e.type, e.text) for e in s.entities], s.text) for s in sentences]
    as_text = score("ner", answers, matching="offsets")["overall"]  # the gold as answers without offsets
    assert as_text["recall"] == 1.0 and as_text["gold"] == 5942 and as_text["pred"] - as_text["tp"] <= 5
    assert sum(len(item_keys("ner", s.entities)) for s in sentences) == 5861  # text keys lost 81 mentions


def test_msra_by_offsets_equals_seqeval_and_counts_repeated_mentions(tmp_path):
    path = FIX / "msra_test_bio.txt"
    assert "\t" in path.read_text(encoding="utf-8").splitlines()[0]  # the distributed form: tab-separated
    found = _bio_against_seqeval(tmp_path, "msra", path, "\t")
    gold = found["gold"].sentences
    assert [s.text for s in gold][:1] == ["李明从上海飞往北京，又从北京回到上海。"]
    assert sum(len(s.entities) for s in gold) == 12 and sum(len(item_keys("ner", s.entities)) for s in gold) == 8
    answers = [
        [Entity("PER", "李明"), Entity("LOC", "上海"), Entity("LOC", "北京")],
        [Entity("ORG", "新华社"), Entity("LOC", "北京"), Entity("ORG", "中国银行"), Entity("LOC", "中国")],
        [Entity("PER", "王芳"), Entity("ORG", "复旦")],
        [],
    ]
    result = score("ner", [(s.entities, a, s.text) for s, a in zip(gold, answers, strict=True)], matching="offsets")
    # every mention found; 中国 inside the predicted 中国银行 is no mention of its own; 复旦 is wrong
    assert (result["overall"]["tp"], result["overall"]["pred"], result["overall"]["gold"]) == (11, 12, 12)


def test_ontonotes_by_offsets_equals_seqeval(tmp_path):
    _bio_against_seqeval(tmp_path, "ontonotes", FIX / "ontonotes.bio", "\t")


def _raw_triples(path: Path, head: str, relation: str, tail, items: str):
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows, [{(m[head].strip(), m[relation], tail(m).strip()) for m in r[items]} for r in rows]


def _re_against_raw(data, raw: list[set], relations: list[str]) -> None:
    """Predictions from the raw triples (every 3rd sentence loses one, every 4th has one relabelled,
    every 5th gains a reversed one); the counts are worked out here on the raw strings."""
    pairs, tp, pred, gold = [], 0, 0, 0
    for index, (sentence, triples) in enumerate(zip(data.sentences, raw, strict=True)):
        predicted = sorted(triples)
        if index % 3 == 0 and predicted:
            predicted = predicted[1:]
        if index % 4 == 1 and predicted:
            h, r, t = predicted[-1]
            predicted[-1] = (h, relations[(relations.index(r) + 1) % len(relations)], t)
        if index % 5 == 2 and triples:
            h, r, t = sorted(triples)[0]
            predicted.append((t, r, h))
        predicted_set = set(predicted)
        tp, pred, gold = tp + len(predicted_set & triples), pred + len(predicted_set), gold + len(triples)
        pairs.append((sentence.triples, [Triple(h, r, t) for h, r, t in predicted], sentence.text))
    result = score("re", pairs, matching="text")["overall"]
    assert (result["tp"], result["pred"], result["gold"]) == (tp, pred, gold)
    assert 0 < tp < gold


def test_nyt11_hrl_validation_against_raw_counts():
    path = _need(SHARED / "nyt11_hrl_valid.jsonl")
    data = load("nyt11_hrl", path)
    rows, raw = _raw_triples(path, "em1Text", "label", lambda m: m["em2Text"], "relationMentions")
    relations = list(data.schema.relations)
    _re_against_raw(data, raw, relations)


def test_nyt11_hrl_plain_english_labels_read_every_triple():
    path = FIX / "nyt11_hrl_english.jsonl"
    data = load("nyt11_hrl", path)
    rows, raw = _raw_triples(path, "em1Text", "label", lambda m: m["em2Text"], "relationMentions")
    assert sum(len(r["relationMentions"]) for r in rows) == 14 == sum(len(s.triples) for s in data.sentences)
    assert data.files[0].unknown_labels == 0
    assert data.sentences[0].triples[0] == Triple("Maria Lopez", "/people/person/place_lived", "Ohio")
    used = {t.relation for s in data.sentences for t in s.triples}
    assert used == set(data.schema.relations)  # all 12 NYT11-HRL relations, read from their English names
    english = [{(h, data.schema.label(r), t) for h, r, t in triples} for triples in raw]
    _re_against_raw(data, english, list(data.schema.relations))


def test_duie_sample_against_raw_counts():
    path = _need(SHARED / "duie2_sample.jsonl")
    data = load("duie", path)
    rows, raw = _raw_triples(path, "subject", "predicate", lambda m: m["object"]["@value"], "spo_list")
    _re_against_raw(data, raw, list(data.schema.relations))


def test_tacred_hand_worked():
    data = load("tacred", FIX / "tacred.json")
    founded = "org:founded_by"
    answers = [[Triple("Microsoft", founded, "Bill Gates"), Triple("Bill Gates", founded, "Microsoft")],
               [Triple("He", "per:cities_of_residence", "here")], []]  # fmt: skip
    pairs = [(s.triples, a, s.text) for s, a in zip(data.sentences, answers, strict=True)]
    result = score("re", pairs, matching="text")["overall"]
    assert (result["tp"], result["pred"], result["gold"]) == (1, 3, 1)  # no_relation is no gold triple


def test_ace05_oneie_by_offsets_hand_worked():
    data = load("ace05", FIX / "ace_oneie.jsonl")
    first = data.sentences[0]
    assert first.matching == "offsets" and first.text == "Rebels attacked the city on Monday ."
    arguments = (Argument("Attacker", "Rebels"), Argument("Target", "the city"), Argument("Place", "Monday"))
    answer = [Event("Conflict:Attack", "attacked", arguments)]
    result = score("ee", [(first.events, answer, first.text)], matching="offsets")
    assert (result["trigger"]["tp"], result["trigger"]["pred"], result["trigger"]["gold"]) == (1, 1, 1)
    # Attacker right; "the city" is not the gold span "city"; Monday has the wrong role; Time missed
    assert (result["argument"]["tp"], result["argument"]["pred"], result["argument"]["gold"]) == (1, 3, 3)


def test_duee_dev_word_level_hand_worked():
    data = load("duee", FIX / "duee_dev.jsonl", schema_file=str(FIX / "duee_dev_schema.jsonl"))
    assert [s.matching for s in data.sentences] == ["word"] * 3 and data.files[0].unknown_labels == 0
    rows = [json.loads(line) for line in (FIX / "duee_dev.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sum(len(e["arguments"]) for r in rows for e in r["event_list"]) == 12
    assert data.sentences[1].events[0].arguments[1] == Argument("裁员人数", "约300人", 9, 14, ("300人",))
    win = "竞赛行为-胜负"
    answers = [
        [Event(win, "击败", (Argument("时间", "昨晚"), Argument("胜者", "湖人"), Argument("败者", "勇士队"))),
         Event(win, "击败了", (Argument("胜者", "凯尔特人队"), Argument("败者", "热火")))],
        [Event("组织关系-裁员", "裁员", (Argument("裁员人数", "300人"), Argument("裁员方", "科技公司")))],
        [],
    ]  # fmt: skip
    pairs = [(s.events, a, s.text) for s, a in zip(data.sentences, answers, strict=True)]
    result = score("ee", pairs, matching="word")
    # triggers: 击败 1.0 and 击败了 0.8 against the two 击败 of sentence 1, 裁员 1.0; 去世 missed
    trigger = result["trigger"]
    assert trigger["tp"] == pytest.approx(2.8) and (trigger["pred"], trigger["gold"]) == (3, 4)
    # arguments: 昨晚 1.0 (its second gold unmatched), 湖人 0.8, 勇士队 1.0, 凯尔特人队 1.0, 热火 0.8,
    # 300人 1.0 by its alias, 科技公司 8/9; sentence 3's four missed
    argument = result["argument"]
    assert argument["tp"] == pytest.approx(5.6 + 8 / 9) and (argument["pred"], argument["gold"]) == (7, 12)
    assert result["overall"] == argument
