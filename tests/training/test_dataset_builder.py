"""make_datasets: row validation, deduplication, token-length filter with the target tokenizer,
seeded split, missing inputs, data card (sources, counts, hashes, demo fixtures named)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.io import read_jsonl
from pipelines.training.dataset_builder import MakeDatasetsConfig, build_datasets, split_rows
from pipelines.training.dataset_targets import model_targets
from pipelines.training.rows import RowError, content_key, normalise_row
from tests.training.conftest import write_jsonl

ROOT = Path(__file__).resolve().parents[2]


def sft(i: int, answer: str = "An answer.", **extra) -> dict:
    row = {"id": f"s{i}", "source": "tagging", "messages": [{"role": "user", "content": f"Question {i}?"}]}
    row["messages"].append({"role": "assistant", "content": answer})
    return row | extra


def dpo(i: int) -> dict:
    return {
        "id": f"d{i}",
        "source": "ram2c",
        "prompt": [{"role": "system", "content": "Tutor."}, {"role": "user", "content": f"Help {i}?"}],
        "chosen": [{"role": "assistant", "content": "What have you tried?"}],
        "rejected": [{"role": "assistant", "content": "No."}],
        "meta": {"fixture": "demo"},
    }


def test_normalise_sft_row_splits_prompt_and_completion():
    row = normalise_row(sft(1, meta={"k": 1}), "sft", "x")
    assert row["prompt"] == [{"role": "user", "content": "Question 1?"}]
    assert row["completion"] == [{"role": "assistant", "content": "An answer."}]
    assert row["source"] == "tagging" and json.loads(row["meta"]) == {"k": 1}


@pytest.mark.parametrize(
    ("row", "kind", "reason"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "sft", "last message must be the assistant"),
        ({"messages": [{"role": "bot", "content": "hi"}, {"role": "assistant", "content": "x"}]}, "sft", "role"),
        ({"messages": [{"role": "user", "content": " "}, {"role": "assistant", "content": "x"}]}, "sft", "empty"),
        ("not a dict", "sft", "not a JSON object"),
        (dpo(1) | {"rejected": [{"role": "assistant", "content": "what have you  TRIED?"}]}, "dpo", "same reply"),
        (dpo(1) | {"chosen": [{"role": "user", "content": "x"}]}, "dpo", "exactly one assistant"),
        (dpo(1) | {"prompt": [{"role": "assistant", "content": "x"}]}, "dpo", "end with a user message"),
        ({k: v for k, v in dpo(1).items() if k != "rejected"}, "dpo", "rejected"),
    ],
)
def test_bad_rows_raise_a_reason(row, kind, reason):
    with pytest.raises(RowError, match=reason):
        normalise_row(row, kind, "x")


def test_content_key_ignores_case_and_whitespace_only():
    a = normalise_row(sft(1, "Paris  is the capital."), "sft", "x")
    b = normalise_row(sft(1, "paris is the CAPITAL."), "sft", "x")
    c = normalise_row(sft(1, "Lyon is the capital."), "sft", "x")
    assert content_key(a, "sft") == content_key(b, "sft") != content_key(c, "sft")


def test_split_is_seeded_and_stable():
    rows = [{"id": str(i)} for i in range(20)]
    keys = [f"k{i}" for i in range(20)]
    cfg = MakeDatasetsConfig(inputs=[{"path": "x", "kind": "sft"}], eval_fraction=0.2, seed=1)
    train, evaluation = split_rows(rows, keys, cfg)
    assert len(evaluation) == 4 and len(train) == 16 and not {r["id"] for r in train} & {r["id"] for r in evaluation}
    assert split_rows(rows, keys, cfg) == (train, evaluation)
    assert split_rows(rows[::-1], keys[::-1], cfg)[1] == evaluation  # input order does not matter
    other = split_rows(rows, keys, cfg.model_copy(update={"seed": 2}))[1]
    assert {r["id"] for r in other} != {r["id"] for r in evaluation}


def test_split_keeps_rows_of_one_prompt_on_one_side():
    rows = [{"id": str(i)} for i in range(30)]
    keys = [f"prompt{i // 3}" for i in range(30)]  # three preference pairs per prompt
    cfg = MakeDatasetsConfig(inputs=[{"path": "x", "kind": "dpo"}], eval_fraction=0.2, seed=3)
    train, evaluation = split_rows(rows, keys, cfg)
    assert len(evaluation) == 6 and len(train) == 24
    eval_prompts = {keys[int(r["id"])] for r in evaluation}
    assert not eval_prompts & {keys[int(r["id"])] for r in train}


def test_build_datasets_end_to_end(tmp_path, qwen_tokenizer):
    from datasets import load_from_disk

    long_answer = "word " * 400
    sft_rows = [sft(i) for i in range(10)] + [sft(3), sft(4, "an   ANSWER."), sft(99, long_answer), {"oops": 1}]
    sft_path = write_jsonl(tmp_path / "gen" / "tagging" / "sft.jsonl", sft_rows)
    dpo_path = write_jsonl(tmp_path / "demo" / "ram2c" / "dpo.jsonl", [dpo(i) for i in range(6)])
    cfg = MakeDatasetsConfig(
        inputs=[
            {"path": str(sft_path), "kind": "sft", "required": True},
            {"path": str(tmp_path / "gen" / "kgc" / "sft.jsonl"), "kind": "sft"},
            {"path": str(dpo_path), "kind": "dpo"},
        ],
        output_dir=str(tmp_path / "train"),
        eval_fraction=0.2,
        reports_dir=str(tmp_path / "reports"),
    )
    targets = model_targets("the-qwen-tokenizer", max_length=200)
    tokenizers = {"sft": qwen_tokenizer, "dpo": qwen_tokenizer}
    metrics = build_datasets(cfg, targets, tokenizers=tokenizers)
    assert metrics["counts"]["sft"] | {"by_source": None} == {
        "train": 8,
        "eval": 2,
        "by_source": None,
        "demo_fixture_rows": 0,
        "removed": {"invalid": 1, "duplicates": 2, "near_duplicates": 0, "contaminated": 0, "too_long": 1},
    }
    assert metrics["counts"]["dpo"]["train"] + metrics["counts"]["dpo"]["eval"] == 6
    assert metrics["inputs_missing"] == [str(tmp_path / "gen" / "kgc" / "sft.jsonl")]
    data = load_from_disk(str(tmp_path / "train" / "sft"))
    assert set(data) == {"train", "eval"} and data["train"].column_names == [
        "id",
        "source",
        "prompt",
        "completion",
        "meta",
    ]
    assert load_from_disk(str(tmp_path / "train" / "dpo"))["train"].column_names[2:5] == [
        "prompt",
        "chosen",
        "rejected",
    ]
    card = json.loads((tmp_path / "train" / "data_card.json").read_text())
    sft_input = next(i for i in card["inputs"] if i["path"] == str(sft_path))
    assert sft_input["read"] == 14 and sft_input["kept"] == 10 and len(sft_input["sha256"]) == 64
    assert card["sha256"]["sft"] == metrics["sha256"]["sft"] and len(card["sha256"]["dpo"]["train"]) == 64
    markdown = (tmp_path / "train" / "DATA_CARD.md").read_text()
    assert "missing (optional, skipped)" in markdown and f"`{dpo_path}` | dpo | DEMO FIXTURE" in markdown
    rejected = read_jsonl(tmp_path / "reports" / "rejected.jsonl")
    assert [r["line"] for r in rejected] == [13, 14]
    assert rejected[0]["reason"].endswith("tokens > max_length") and int(rejected[0]["reason"].split()[0]) > 400
    assert rejected[1]["reason"].startswith("messages: expected a non-empty list") and rejected[1]["row"] == {"oops": 1}
    # same inputs, same outputs: content hashes are deterministic
    assert build_datasets(cfg, targets, tokenizers=tokenizers)["sha256"] == metrics["sha256"]


def test_missing_inputs(tmp_path, qwen_tokenizer):
    absent = {"path": str(tmp_path / "none.jsonl"), "kind": "sft"}
    with pytest.raises(FileNotFoundError, match="none of the make_datasets inputs exist"):
        build_datasets(MakeDatasetsConfig(inputs=[absent], output_dir=str(tmp_path)), model_targets("unused"))
    present = {"path": str(write_jsonl(tmp_path / "a.jsonl", [sft(1)])), "kind": "sft"}
    with pytest.raises(FileNotFoundError, match="required make_datasets input"):
        build_datasets(
            MakeDatasetsConfig(inputs=[present, absent | {"required": True}], output_dir=str(tmp_path)),
            model_targets("unused"),
        )


def test_demo_fixtures_are_valid_and_marked():
    for path, kind, expected in (("data/demo/ram2c/dpo.jsonl", "dpo", 40), ("data/demo/kgc/sft.jsonl", "sft", 18)):
        rows = read_jsonl(ROOT / path)
        clean = [normalise_row(row, kind, "x") for row in rows]
        assert len(clean) == expected and all(json.loads(r["meta"])["fixture"] == "demo" for r in clean)
        assert len({content_key(r, kind) for r in clean}) == expected
        languages = {json.loads(r["meta"])["language"] for r in clean}
        assert languages == {"en", "zh"}
