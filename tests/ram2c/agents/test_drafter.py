"""The drafter: its prompts, a conversation of the system text, the earlier turns and the latest answer."""

import pytest

from tests.ram2c.agents.prompt_cases import assert_matches_golden, golden_keys, render_all


@pytest.mark.parametrize("key", golden_keys("drafter"))
def test_prompts_match_the_golden_file(key):
    assert_matches_golden(key)


def test_drafter_prompt_is_system_history_then_the_latest_answer():
    rendered = render_all()
    roles = [m["role"] for m in rendered["drafter_later_turn.en"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert rendered["drafter_later_turn.en"][0] == rendered["drafter.en"][0]
