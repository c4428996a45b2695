"""The reviser: its prompts, and an empty revision is refused."""

import pytest

from pipelines.agents import ParseError
from tests.ram2c.agents.prompt_cases import AGENTS, assert_matches_golden, golden_keys


@pytest.mark.parametrize("key", golden_keys("reviser"))
def test_prompts_match_the_golden_file(key):
    assert_matches_golden(key)


@pytest.mark.parametrize("text", ["", "   ", "Teacher:", '""'])
def test_parse_reply_empty(text):
    with pytest.raises(ParseError):
        AGENTS["reviser"].parse(text)
