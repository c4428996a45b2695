"""Quality gates on crafted pairs: each reason, its order, and the counts."""

import pytest

from pipelines.ram2c.config import GateConfig
from pipelines.ram2c.gates import apply_gates, gate_reason, language_share

CFG = GateConfig(max_chars={"en": 80, "zh": 30}, min_language_share=0.5)
GOOD_EN = "What a thoughtful answer! Why do you think he kept going?"
DRAFT_EN = "Yes. He went to sea."
GOOD_ZH = "你想得真仔细！你觉得他为什么坚持下去？"
DRAFT_ZH = "对。他去了海上。"


@pytest.mark.parametrize(
    "chosen, rejected, language, reason",
    [
        (GOOD_EN, DRAFT_EN, "en", None),
        (GOOD_ZH, DRAFT_ZH, "zh", None),
        ("", DRAFT_EN, "en", "empty_chosen"),
        (GOOD_EN, "  \n", "en", "empty_rejected"),
        (GOOD_EN, "  what a THOUGHTFUL answer!   Why do you think he kept going?", "en", "same"),
        ("你想得真仔细！你觉得他为什么坚持下去？", DRAFT_EN, "en", "wrong_language_chosen"),
        (GOOD_ZH, "Yes. He went to sea.", "zh", "wrong_language_rejected"),
        ("Great! " * 20, DRAFT_EN, "en", "too_long_chosen"),
        (GOOD_ZH, "对" * 31, "zh", "too_long_rejected"),
        ("The experts agree: why did he go?", DRAFT_EN, "en", "names_experts"),
        ("Based on the document, why did he go?", DRAFT_EN, "en", "names_experts"),
        ("Ms. Lin thinks you are right. Why?", DRAFT_EN, "en", "names_experts"),
        ("根据参考资料，你觉得他为什么去？", DRAFT_ZH, "zh", "names_experts"),
        ("林老师说得对，你觉得呢？", DRAFT_ZH, "zh", "names_experts"),
        ("Version 1: Good! Why did he go?", DRAFT_EN, "en", "names_experts"),  # the synthesis echoed its input
        ("An expertly told story! Why did he go?", DRAFT_EN, "en", None),  # "expertly" is not "expert"
    ],
)
def test_gate_reasons(chosen, rejected, language, reason):
    assert gate_reason(chosen, rejected, language, CFG) == reason


def test_language_share_counts_scripts():
    assert language_share("abc 你好", "en") == pytest.approx(3 / 5)
    assert language_share("abc 你好", "zh") == pytest.approx(2 / 5)
    assert language_share("123 !!", "en") == 0.0


def test_apply_gates_counts_drops_by_reason():
    pairs = [
        {"id": "a", "chosen": GOOD_EN, "rejected": DRAFT_EN, "language": "en"},
        {"id": "b", "chosen": DRAFT_EN, "rejected": DRAFT_EN, "language": "en"},
        {"id": "c", "chosen": "", "rejected": DRAFT_EN, "language": "en"},
        {"id": "d", "chosen": "The expert says hi?", "rejected": DRAFT_EN, "language": "en"},
        {"id": "e", "chosen": DRAFT_ZH, "rejected": DRAFT_ZH, "language": "zh"},
    ]
    kept, dropped, counts = apply_gates(pairs, CFG)
    assert [p["id"] for p in kept] == ["a"]
    assert [(d["id"], d["reason"]) for d in dropped] == [
        ("b", "same"),
        ("c", "empty_chosen"),
        ("d", "names_experts"),
        ("e", "same"),
    ]
    assert counts == {"empty_chosen": 1, "names_experts": 1, "same": 2}
