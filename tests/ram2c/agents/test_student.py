"""The student: its prompts on the first turn and on a later one."""

import pytest

from tests.ram2c.agents.prompt_cases import assert_matches_golden, golden_keys


@pytest.mark.parametrize("key", golden_keys("student"))
def test_prompts_match_the_golden_file(key):
    assert_matches_golden(key)
