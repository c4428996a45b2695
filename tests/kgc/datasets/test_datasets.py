"""Readers on fixtures the project writes (every format, every counted problem) and on the shared
real files, whose counts are computed here independently from the raw text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipelines.kgc.datasets import DatasetConfig, ReaderError, load_dataset, split_sample
from pipelines.kgc.schema import Argument, Entity, Event, Triple, load_schema

ROOT = Path(__file__).resolve().parents[3]
FIX = Path(__file__).parents[1] / "fixtures"  # shared with tests/kgc/test_scoring_files.py
SHARED = Path(os.environ.get("EDUMAS_SHARED_DATA", ROOT.parent / "shared" / "data")) / "kgc"


def load(fmt, name, path, **kw):
    return load_dataset(DatasetConfig(name=name, format=fmt, files=[str(path)], **kw))


def test_conll_entities_broken_bio_and_unknown_labels_counted_per_file():
    data = load("conll", "conllpp", FIX / "conll_broken.txt")
    texts = [s.text for s in data.sentences]
    assert texts == ["EU rejects German call .", "Peter Blackburn visited Bonn", "BRUSSELS and London"]
    assert data.sentences[0].entities == [Entity("ORG", "EU", 0, 2), Entity("MISC", "German", 11, 17)]
    # I-PER at the start opens an entity (seqeval's reading) and is counted as broken
    assert data.sentences[1].entities == [Entity("PER", "Peter Blackburn", 0, 15)]
    assert data.sentences[2].entities == [Entity("LOC", "BRUSSELS", 0, 8), Entity("LOC", "London", 13, 19)]
    counts = data.files[0]
    assert (counts.sentences, counts.items, counts.broken_bio, counts.unknown_labels) == (3, 5, 2, 1)
    assert any(n.endswith("conll_broken.txt:12: entity type 'XYZ' is not in schema conllpp") for n in counts.notes)
    assert any(":9: I-PER does not continue" in n for n in counts.notes)


def test_unreadable_line_names_file_and_line():
    with pytest.raises(ReaderError, match=r"conll_bad_line.txt:2: expected a token and its tag"):
        load("conll", "c", FIX / "conll_bad_line.txt")
    with pytest.raises(ReaderError, match=r"nyt_bad.jsonl:2: not valid JSON"):
        load("nyt11_hrl", "n", FIX / "nyt_bad.jsonl")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load("conll", "c", FIX / "missing.txt")


def test_ontonotes_conll2012_bio_form():
    data = load("ontonotes", "ontonotes5", FIX / "ontonotes.bio")
    assert [s.entities for s in data.sentences] == [
        [Entity("FAC", "White House", 4, 15), Entity("DATE", "Monday", 21, 27)],
        [Entity("CARDINAL", "Three", 0, 5)],
    ]
    assert len(load_schema("ontonotes5").entity_types) == 18


def test_msra_is_read_in_characters_with_label_aliases():
    data = load("msra", "msra", FIX / "msra.txt")
    assert [s.text for s in data.sentences] == ["中国银行在北京", "王小明说"]
    assert data.sentences[0].entities == [Entity("ORG", "中国银行", 0, 4), Entity("LOC", "北京", 5, 7)]
    assert data.sentences[1].entities == [Entity("PER", "王小明", 0, 3)] and data.sentences[0].language == "zh"


def test_nyt_duplicates_once_bad_spans_and_unknown_labels():
    data = load("nyt11_hrl", "nyt11_hrl", FIX / "nyt.jsonl")
    assert data.sentences[0].text == "Paris is in France ."
    assert data.sentences[0].triples == [Triple("France", "/location/location/contains", "Paris")]
    assert data.sentences[1].triples == [Triple("Bob", "/people/person/place_lived", "Milan")]
    counts = data.files[0]
    assert (counts.items, counts.bad_spans, counts.unknown_labels) == (2, 1, 1)  # 'None' is not a triple


def test_tacred_no_relation_and_out_of_range_spans():
    data = load("tacred", "retacred", FIX / "tacred.json")
    assert [s.triples for s in data.sentences] == [[Triple("Microsoft", "org:founded_by", "Bill Gates")], [], []]
    assert data.files[0].bad_spans == 1 and data.sentences[0].id == "retacred:t1"


def test_duie_complex_objects_kept():
    data = load("duie", "duie2", FIX / "duie.jsonl")
    assert data.sentences[0].triples == [
        Triple("星球", "上映时间", "2016年", (("inArea", "美国"),)),
        Triple("星球", "导演", "李四"),
    ]
    assert (data.files[0].bad_spans, data.files[0].unknown_labels) == (1, 1)


def test_ace_oneie_and_dygie_rows():
    data = load("ace05", "ace05", FIX / "ace_oneie.jsonl")
    first = data.sentences[0]
    assert first.events == [
        Event(
            "Conflict:Attack",
            "attacked",
            (
                Argument("Attacker", "Rebels", 0, 6),
                Argument("Target", "city", 20, 24),
                Argument("Time", "Monday", 28, 34),
            ),
            7,
            15,
        )
    ]
    assert data.files[0].unknown_labels == 2  # role Victim of an attack, event type Life:Party
    born = data.sentences[2]
    assert born.text == "She was born in Oslo ." and born.id == "ace05:doc2:1"
    assert born.events == [
        Event("Life:Be-Born", "born", (Argument("Person", "She", 0, 3), Argument("Place", "Oslo", 16, 20)), 8, 12)
    ]


def test_duee_with_schema_file():
    data = load("duee", "duee1", FIX / "duee.jsonl", schema_file=str(FIX / "duee_schema.jsonl"))
    events = data.sentences[0].events
    assert events[0] == Event(
        "组织关系-裁员", "裁员", (Argument("裁员方", "某公司", 0, 3), Argument("裁员人数", "200人", 7, 11)), 5, 7
    )
    assert events[1].start == 3  # offset 9 does not hold 今年: counted, found at 3
    assert (data.files[0].bad_spans, data.files[0].unknown_labels) == (1, 1)
    with pytest.raises(ReaderError, match="schema_file"):
        load("duee", "duee1", FIX / "duee.jsonl")


def test_demo_set_loads_without_problems():
    specs = [
        ("conll", "conllpp", "ner_en.conll", None),
        ("msra", "msra", "ner_zh.msra.txt", None),
        ("nyt11_hrl", "nyt11_hrl", "re_en.nyt.jsonl", None),
        ("duie", "duie2", "re_zh.duie.jsonl", None),
        ("ace05", "ace05", "ee_en.oneie.jsonl", None),
        ("duee", "duee1", "ee_zh.duee.jsonl", "ee_zh.duee_schema.jsonl"),
    ]
    for fmt, name, file, schema in specs:
        data = load(
            fmt, name, ROOT / "data/kgc" / file, schema_file=str(ROOT / "data/kgc" / schema) if schema else None
        )
        c = data.files[0]
        assert c.sentences >= 5 and c.items >= 5 and (c.bad_spans, c.broken_bio, c.unknown_labels) == (0, 0, 0), file


def test_seeded_sample_is_stable_and_disjoint_from_pool():
    data = load("conll", "conllpp", ROOT / "data/kgc/ner_en.conll")
    a, rest = split_sample(data.sentences, 3, seed=1)
    b, _ = split_sample(data.sentences, 3, seed=1)
    assert [s.id for s in a] == [s.id for s in b] and len(rest) == len(data.sentences) - 3
    assert not {s.id for s in a} & {s.id for s in rest}


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (optional; the demo set is the default)")
    return path


def test_shared_conllpp_dev_counts():
    path = _need(SHARED / "conllpp_dev.txt")
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, current = [], []
    for line in lines + [""]:
        if not line.strip() or line.startswith("-DOCSTART-"):
            if current:
                blocks.append(current)
            current = []
        else:
            current.append(line.split()[-1])
    entities = sum(tag.startswith("B-") for block in blocks for tag in block)
    data = load("conll", "conllpp", path)
    assert len(data.sentences) == len(blocks) == 3250
    assert sum(len(s.entities) for s in data.sentences) == entities == 5942
    assert (data.files[0].broken_bio, data.files[0].unknown_labels) == (0, 0)


def test_shared_nyt11_hrl_counts():
    path = _need(SHARED / "nyt11_hrl_valid.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    unique = sum(len({(m["em1Text"], m["label"], m["em2Text"]) for m in r["relationMentions"]}) for r in rows)
    data = load("nyt11_hrl", "nyt11_hrl", path)
    assert len(data.sentences) == len(rows) == 313
    assert sum(len(s.triples) for s in data.sentences) == unique
    assert data.files[0].unknown_labels == 0


def test_shared_duie_sample_counts():
    path = _need(SHARED / "duie2_sample.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    data = load("duie", "duie2", path)
    assert len(data.sentences) == len(rows) == 40
    assert sum(len(s.triples) for s in data.sentences) == sum(len(r["spo_list"]) for r in rows)
    schema = load_schema("duie2")
    for row in rows:  # every subject type of the sample agrees with the bundled schema
        for spo in row["spo_list"]:
            assert schema.relations[spo["predicate"]][0] == spo["subject_type"]


def _schema_without_aliases(tmp_path: Path) -> Path:
    data = load_schema("nyt11_hrl").to_dict()
    data["aliases"] = {}
    path = tmp_path / "nyt_paths_only.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_english_nyt_labels_read_through_the_schema_aliases():
    data = load("nyt11_hrl", "nyt11_hrl", FIX / "nyt11_hrl_english.jsonl")
    assert (data.files[0].items, data.files[0].unknown_labels) == (14, 0)
    assert load_schema("nyt11_hrl").label("Place_Lived") == "/people/person/place_lived"  # case, _ and - ignored


def test_mostly_unknown_labels_stop_with_the_file_the_labels_and_the_fix(tmp_path):
    from pipelines.kgc.datasets import GoldError

    with pytest.raises(GoldError) as caught:
        schema = str(_schema_without_aliases(tmp_path))
        load("nyt11_hrl", "nyt11_hrl", FIX / "nyt11_hrl_english.jsonl", schema_name=schema)
    message = str(caught.value)
    assert message.startswith(f"{FIX / 'nyt11_hrl_english.jsonl'}: dataset nyt11_hrl: 14 gold labels are not in schema")
    assert "'location contains' x2" in message and "'country of administrative divisions' x2" in message
    assert "/location/location/contains" in message  # what the schema knows
    assert "kgc.datasets[].schema_name" in message and '"aliases"' in message  # the fix


def test_a_file_without_gold_is_an_error(tmp_path):
    from pipelines.kgc.datasets import GoldError

    empty = tmp_path / "no_gold.jsonl"
    empty.write_text(json.dumps({"sentText": " A sentence . ", "relationMentions": []}) + "\n", encoding="utf-8")
    with pytest.raises(GoldError, match=r"no_gold.jsonl: dataset n: 1 sentences but no gold item; check .*nyt11_hrl"):
        load("nyt11_hrl", "n", empty)
