"""Exports of kept pairs: the shared DPO/SFT rows, the ``datasets`` folder that trl's DPOTrainer
trains on unchanged (one step on the tiny Qwen2), and LLaMA-Factory's documented sharegpt
preference layout with ``ranking: true``."""

import json

import pytest

from pipelines.ram2c.exports import dataset_info, sharegpt_row, write_exports
from pipelines.training.rows import normalise_row

SYSTEM = "You are a literature teacher discussing the novel Robinson Crusoe with a student."
PAIRS = [
    {
        "id": "d0-t1",
        "language": "en",
        "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "He was brave to go to sea."}],
        "chosen": "I love how you noticed his courage! What made him brave, do you think?",
        "rejected": "Yes.",
        "meta": {"dialogue": "d0", "turn": 1},
    },
    {
        "id": "d0-t2",
        "language": "en",
        "prompt": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "He was brave to go to sea."},
            {"role": "assistant", "content": "I love how you noticed his courage! What made him brave?"},
            {"role": "user", "content": "He did not listen to his father."},
        ],
        "chosen": "Good point: was that brave or stubborn? What would you have done?",
        "rejected": "He was stubborn.",
        "meta": {"dialogue": "d0", "turn": 2},
    },
]


@pytest.fixture
def exported(tmp_path):
    counts = write_exports(PAIRS, tmp_path, name="ram2c_preference")
    return tmp_path, counts


def test_dpo_and_sft_rows_are_the_shared_format(exported):
    out, counts = exported
    assert counts == {"dpo.jsonl": 2, "sft.jsonl": 2, "preference": 2, "llamafactory": 2}
    dpo = [json.loads(line) for line in (out / "dpo.jsonl").read_text().splitlines()]
    assert dpo[1]["prompt"] == PAIRS[1]["prompt"] and dpo[1]["id"] == "ram2c-d0-t2"
    assert dpo[1]["chosen"] == [{"role": "assistant", "content": PAIRS[1]["chosen"]}]
    assert dpo[1]["rejected"] == [{"role": "assistant", "content": "He was stubborn."}]
    assert dpo[0]["source"] == "ram2c" and dpo[0]["meta"] == {"language": "en", "dialogue": "d0", "turn": 1}
    for row in dpo:
        normalise_row(row, "dpo", "ram2c")  # make_datasets accepts every row
    sft = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    assert sft[0]["messages"][-1] == {"role": "assistant", "content": PAIRS[0]["chosen"]}
    for row in sft:
        normalise_row(row, "sft", "ram2c")


def test_llamafactory_layout_matches_its_documentation(exported):
    out, _ = exported
    info = json.loads((out / "llamafactory" / "dataset_info.json").read_text())
    assert info["ram2c_preference"] == {
        "file_name": "ram2c_preference.json",
        "formatting": "sharegpt",
        "ranking": True,
        "columns": {"messages": "conversations", "system": "system", "chosen": "chosen", "rejected": "rejected"},
    }
    assert "ranking" not in info["ram2c_preference_sft"]
    rows = json.loads((out / "llamafactory" / "ram2c_preference.json").read_text())
    assert rows[1] == {
        "conversations": [
            {"from": "human", "value": "He was brave to go to sea."},
            {"from": "gpt", "value": "I love how you noticed his courage! What made him brave?"},
            {"from": "human", "value": "He did not listen to his father."},
        ],
        "chosen": {"from": "gpt", "value": PAIRS[1]["chosen"]},
        "rejected": {"from": "gpt", "value": "He was stubborn."},
        "system": SYSTEM,
    }
    for row in rows:  # human in odd positions, gpt in even ones (1-based), ending with human
        assert [m["from"] for m in row["conversations"]] == ["human", "gpt"] * (len(row["conversations"]) // 2) + [
            "human"
        ]
    sft = json.loads((out / "llamafactory" / "ram2c_preference_sft.json").read_text())
    assert sft[0]["conversations"][-1] == {"from": "gpt", "value": PAIRS[0]["chosen"]}
    assert set(dataset_info("x")) == {"x", "x_sft"}
    assert sharegpt_row(PAIRS[0])["system"] == SYSTEM


def test_saved_dataset_loads_with_the_conversational_columns(exported):
    from datasets import load_from_disk

    out, _ = exported
    data = load_from_disk(str(out / "preference"))
    assert data.column_names == ["id", "source", "prompt", "chosen", "rejected", "meta"]
    assert data[0]["prompt"] == PAIRS[0]["prompt"]
    assert json.loads(data[1]["meta"]) == {"language": "en", "dialogue": "d0", "turn": 2}


@pytest.mark.slow
def test_trl_dpo_trainer_trains_one_step_on_the_saved_dataset(exported, tmp_path, one_torch_thread):
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from tests.tiny_models import tiny_qwen2

    out, _ = exported
    model_dir = tiny_qwen2(tmp_path / "tiny", layers=1, hidden=32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    args = DPOConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=1,
        per_device_train_batch_size=2,
        max_length=128,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        bf16=False,
        use_cpu=True,
    )
    trainer = DPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=args,
        train_dataset=load_from_disk(str(out / "preference")),
        processing_class=tokenizer,
    )
    result = trainer.train()
    assert result.global_step == 1
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 1 and abs(losses[0] - 0.6931) < 0.01  # policy == reference at step 0
