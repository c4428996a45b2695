"""The SFT target the team's verdict becomes (``pipelines/tagging/sft.py``): each sub-constraint's
reason, then the verdict, against the golden file."""

from tests.tagging.agents.prompt_cases import LANGUAGES, assert_golden, sft_target


def test_reasoned_verdict_matches_golden():
    assert_golden({f"sft_target.{lang}": sft_target(lang) for lang in LANGUAGES})


def test_reasoned_verdict_ends_with_why_it_fails():
    assert sft_target("en").endswith(
        "At least one sub-constraint fails, so the question does not test this knowledge.\n<No>"
    )
