"""The topic writer's content rules are in the schema the backend enforces: xgrammar's grammar of
``QuestionOut``'s JSON schema (what the transformers backend decodes under) accepts one question of
8-120 characters ending with "?" or "？" and nothing the parser would refuse: the example's
placeholder, a reply without a question mark, a copy of the passage longer than the bound."""

import json

import pytest

from pipelines.ram2c.agents import make_agents
from pipelines.ram2c.agents.replies import QuestionOut

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
    agent = make_agents()["topic_writer"]  # a reply that breaks the schema falls back to the text parser
    assert agent.parse('{"question": "Why did he sail? Because."}', "json") == "Why did he sail?"
