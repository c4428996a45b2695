"""The shared row builders: the documented SFT/DPO formats, validated once."""

import pytest

from pipelines.training.rows import RowError, dpo_row, normalise_row, sft_row

PROMPT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"}]


def test_sft_row_format_and_validation():
    row = sft_row([*PROMPT, {"role": "assistant", "content": "4"}], source="kgc", sample_id="q7", meta={"k": 1})
    assert row == {
        "id": "kgc-q7",
        "source": "kgc",
        "messages": [*PROMPT, {"role": "assistant", "content": "4"}],
        "meta": {"k": 1},
    }
    assert normalise_row(row, "sft", "x")["completion"] == [{"role": "assistant", "content": "4"}]
    with pytest.raises(RowError, match="last message must be the assistant target"):
        sft_row(PROMPT, source="kgc", sample_id="q7")
    with pytest.raises(RowError, match="empty"):
        sft_row([*PROMPT, {"role": "assistant", "content": "  "}], source="kgc", sample_id="q7")


def test_dpo_row_format_and_validation():
    row = dpo_row(PROMPT, "4", [{"role": "assistant", "content": "5"}], source="ram2c", sample_id="d1")
    assert row == {
        "id": "ram2c-d1",
        "source": "ram2c",
        "prompt": PROMPT,
        "chosen": [{"role": "assistant", "content": "4"}],
        "rejected": [{"role": "assistant", "content": "5"}],
        "meta": {},
    }
    with pytest.raises(RowError, match="same reply"):
        dpo_row(PROMPT, "4", " 4 ", source="ram2c", sample_id="d1")
    with pytest.raises(RowError, match="must end with a user message"):
        dpo_row(PROMPT[:1], "4", "5", source="ram2c", sample_id="d1")
