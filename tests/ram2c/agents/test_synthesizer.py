"""The synthesizer: its prompts, one spelled out in full."""

import pytest

from pipelines.ram2c.students import make_personas
from tests.ram2c.agents.prompt_cases import AGENTS, TEXT, assert_matches_golden, golden_keys


@pytest.mark.parametrize("key", golden_keys("synthesizer"))
def test_prompts_match_the_golden_file(key):
    assert_matches_golden(key)


def test_prompt_spelled_out():
    student = make_personas(1, "en", seed=0)[0].to_vars()
    assert student == {
        "id": "s0",
        "grade": "grade 6",
        "traits": ["curious", "playful"],
        "interest": "cooking",
        "reading_level": "reads at grade level",
    }
    t = TEXT["en"]
    messages = AGENTS["synthesizer"].render(
        "en", topic=t["topic"], answer=t["answer"], student=student, revisions=["First version.", "Second version."]
    )
    assert messages[1]["content"] == (
        "Student: grade 6, curious and playful, likes cooking, reads at grade level\n"
        "Topic: Why did Mara take the lantern?\n"
        "Student's answer: Because Tobin was hurt and ships were out there.\n\n"
        "Version 1: First version.\n\n"
        "Version 2: Second version.\n\n"
        "Final reply:"
    )
