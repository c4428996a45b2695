"""The topic writer: its prompts, parse_question, and its content rules in the schema the backend
enforces: xgrammar's grammar of ``QuestionOut``'s JSON schema (what the transformers backend decodes
under) accepts one question of 8-120 characters ending with "?" or "？" and nothing the parser would
refuse: the example's placeholder, a reply without a question mark, a copy of the passage longer
than the bound."""

import json

import pytest

from pipelines.agents import ParseError
from pipelines.ram2c.agents.topic_writer import QuestionOut, parse_question
from tests.ram2c.agents.prompt_cases import AGENTS, assert_matches_golden, golden_keys

PASSAGE = ("The climb felt endless. Rain hammered the tower and the stair shook with every gust. Halfway up, "
           "Mara's lantern went out. She stood in the dark and listened?")  # fmt: skip
GOOD = ["Why did Mara keep climbing in the dark?", "你觉得玛拉为什么不害怕呢？"]
BAD = [
    "<your question to the student, ending with ?>",  # the example's placeholder (seen with SmolLM2)
    "The Lighthouse Apprentice, chapter 1: The story of the lighthouse",  # the book line, no question mark
    PASSAGE,  # the passage copied: over 120 characters
    "Why?",  # too short
    'What did "the keeper" say?',  # quotes would need escapes the parser does not undo
    "Why did she stop?\nWhat next?",  # two lines
]


@pytest.mark.parametrize("key", golden_keys("topic_writer"))
def test_prompts_match_the_golden_file(key):
    assert_matches_golden(key)


@pytest.mark.parametrize(
    "text, question",
    [
        ("Why did Mara take the lantern?", "Why did Mara take the lantern?"),
        ("Here is a question:\nQuestion: Why did Mara climb the stair? It was dark.", "Why did Mara climb the stair?"),
        ('{"question": "How did Tobin feel?"}', "How did Tobin feel?"),
        ("玛拉为什么接过提灯？请说明理由。", "玛拉为什么接过提灯？"),
        ("What did Mara see？Why?", "What did Mara see？"),  # cut after the first mark, either script
    ],
)
def test_parse_question(text, question):
    assert parse_question(text) == question


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Why?",
        "\n\n",
        "Describe how the storm changed Mara.",  # not a question
        '{"question": "The Lighthouse Apprentice, chapter 1"}',  # the book line copied (seen with SmolLM2)
        '{"question": "The climb felt endless. Rain hammered the tower and"}',  # the passage copied
    ],
)
def test_parse_question_rejects_empty_and_too_short(text):
    with pytest.raises(ParseError):
        AGENTS["topic_writer"].parse(text)


def _accepts(grammar, question: str) -> bool:
    from xgrammar.testing import _is_grammar_accept_string

    return _is_grammar_accept_string(grammar, json.dumps({"question": question}, ensure_ascii=False))


def test_the_backend_grammar_holds_the_parsers_rules():
    xgr = pytest.importorskip("xgrammar", reason="xgrammar constrains the transformers backend")
    grammar = xgr.Grammar.from_json_schema(json.dumps(QuestionOut.model_json_schema()), any_whitespace=False,
                                           strict_mode=True)  # fmt: skip
    assert [_accepts(grammar, q) for q in GOOD] == [True, True]
    assert [_accepts(grammar, q) for q in BAD] == [False] * len(BAD)


def test_pydantic_validates_the_same_rules_and_the_agent_still_reads_text():
    assert [QuestionOut(question=q).to_result() for q in GOOD] == GOOD
    for question in BAD:
        with pytest.raises(ValueError):
            QuestionOut(question=question)
    agent = AGENTS["topic_writer"]  # a reply that breaks the schema falls back to the text parser
    assert agent.parse('{"question": "Why did he sail? Because."}', "json") == "Why did he sail?"
