"""Readers and the demo set's labels (re-checked from the numbers)."""

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from pipelines.tagging.data import FieldMap, TaggingDataConfig, read_examples

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "tagging" / "demo.jsonl"
SHARED = Path(os.environ.get("EDUMAS_SHARED_DIR") or ROOT.parent / "shared")  # ../shared (override for worktrees)
SHARED_CSV = SHARED / "data" / "tagging" / "mathfish_few_shot_entailment.csv"


def truth(kid, m):
    """Each concept's rule, written independently of the generator."""
    two_digit = lambda x: 10 <= x <= 99  # noqa: E731
    rules = {
        "mul_2d_by_1d": lambda: m["op"] == "mul" and two_digit(m["a"]) and 2 <= m["b"] <= 9,
        "add_within_100": lambda: m["op"] == "add" and m["a"] + m["b"] <= 100,
        "price_three_digit": lambda: m["topic"] == "shopping" and any(len(str(p)) == 3 for p in m["prices"]),
        "combinations_le_15": lambda: m["op"] == "combine" and m["m"] * m["n"] <= 15,
        "sub_with_regrouping": lambda: (
            m["op"] == "sub" and two_digit(m["a"]) and two_digit(m["b"]) and m["a"] % 10 < m["b"] % 10
        ),
        "div_with_remainder": lambda: (
            m["op"] == "div" and two_digit(m["a"]) and 2 <= m["b"] <= 9 and m["a"] % m["b"] != 0
        ),
    }
    return int(rules[kid]())


def semantic_truth(kid, m):
    """The definition's non-numerical part alone: the operation or topic it asks for."""
    wanted = {"mul_2d_by_1d": "mul", "add_within_100": "add", "price_three_digit": "shopping",
              "combinations_le_15": "combine", "sub_with_regrouping": "sub", "div_with_remainder": "div"}  # fmt: skip
    return int(m.get("op", m.get("topic")) == wanted[kid])


def test_demo_set_labels_are_correct_and_balanced():
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 80 and len({r["id"] for r in rows}) == len(rows)
    assert len({r["knowledge_id"] for r in rows}) >= 6
    for row in rows:
        assert row["label"] == truth(row["knowledge_id"], row["meta"]), row["id"]
        numbers = [v for v in row["meta"].values() if isinstance(v, int)] + row["meta"].get("prices", [])
        found = [int(x) for x in re.findall(r"\d+", row["question"])]
        assert sorted(numbers) == sorted(found), row["id"]  # the meta numbers are the question's numbers
        assert row["rationale"].endswith(("<Yes>。", "<No>。", "<Yes>.", "<No>."))
        assert row["semantic_label"] == semantic_truth(row["knowledge_id"], row["meta"]), row["id"]
        assert row["semantic_label"] == 1 or row["label"] == 0  # a positive meets the semantic part
    counts = Counter((r["knowledge_id"], r["language"], r["label"]) for r in rows)
    for kid in {r["knowledge_id"] for r in rows}:
        for lang in ("en", "zh"):
            assert counts[(kid, lang, 1)] >= 3 and counts[(kid, lang, 0)] >= 3
    semantic = Counter((r["knowledge_id"], r["language"], r["semantic_label"]) for r in rows)
    assert all(semantic[(kid, lang, 0)] >= 2 for kid, lang, _ in counts)  # semantic negatives to show the judge


def test_reader_maps_fields_labels_and_skips_unreadable_rows(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("k,q,y\nAdd within 10,1 + 2 = ?,YES\nAdd within 10,7 + 8 = ?,no\nAdd within 10,?,maybe\n")
    cfg = TaggingDataConfig(
        path=str(path),
        fields=FieldMap(
            definition="k", question="q", label="y", id=None, knowledge_id=None, language=None, rationale=None
        ),
    )
    rows = read_examples(cfg)
    assert [(r.question, r.label, r.language) for r in rows] == [("1 + 2 = ?", 1, "en"), ("7 + 8 = ?", 0, "en")]
    assert rows[0].knowledge_id == rows[1].knowledge_id and rows[0].knowledge_id.startswith("k-")
    with pytest.raises(ValueError, match="no column 'question'"):
        read_examples(TaggingDataConfig(path=str(path), fields=FieldMap(definition="k", label="y")))


def test_default_config_reads_the_demo_set_and_filters_languages():
    rows = read_examples(TaggingDataConfig(), ROOT)
    assert len(rows) == 108 and {r.language for r in rows} == {"en", "zh"}
    zh = read_examples(TaggingDataConfig(languages=["zh"]), ROOT)
    assert zh and all(r.language == "zh" for r in zh)


def test_shared_mathfish_csv_reads_by_params_alone():
    if not SHARED_CSV.exists():
        pytest.skip(f"shared data not found at {SHARED_CSV} (optional; only the demo set is required)")
    cfg = TaggingDataConfig(
        path=str(SHARED_CSV),
        fields=FieldMap(
            definition="standard_description",
            question="text",
            label="aligns",
            id="id",
            knowledge_id=None,
            language=None,
            rationale=None,
        ),
    )
    rows = read_examples(cfg)
    assert len(rows) == 24 and Counter(r.label for r in rows) == {1: 12, 0: 12}
    assert rows[0].id == "fl_problem_001894_pos_0" and rows[0].label == 1
    assert rows[0].definition.startswith("Prove the addition and subtraction formulas")
