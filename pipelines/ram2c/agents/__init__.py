"""The RAM2C agents: templates ``<agent>.<lang>.j2`` beside this file, their output models and
parsers in :mod:`pipelines.ram2c.agents.replies`.

    topic_writer  passage, level, direction      -> one discussion question (Q)
    student       persona, topic, teacher reply  -> the student's answer (A)
    drafter       the pair's prompt messages     -> the raw reply (R2, rejected)
    ballot        expert, context, all documents -> yes / no per document (group reflection, one call)
    voter         expert, context, one document  -> yes / no (group reflection, one call per document)
    analyst       expert, context, its reference -> explicit analysis (proactive analysis)
    reviser       expert, context, its analysis  -> that expert's revision
    analyst_reviser  expert, context, its reference -> its analysis, then its revision, in one reply
                  (``expert_call: joint``, the default: the analysis is the revision's chain of thought)
    synthesizer   context, the group's revisions -> the group's reply (E group's = R1, chosen)

Every parser takes plain text or a JSON object, so the same agents work in text and json modes.
In json mode the prompt shows a one-line example of the reply (``EXAMPLES`` of
the output model, in the prompt's language) instead of the pretty JSON schema, which cost ~100
prompt tokens per call; the schema itself still goes to the backend (constrained decoding).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from pipelines.agents import Agent, ParseError
from pipelines.llm.types import Message
from pipelines.ram2c.agents.replies import (
    AnalysisOut,
    QuestionOut,
    ReplyOut,
    VoteOut,
    analysed_revision_output,
    ballot_output,
    parse_analysed_revision,
    parse_analysis,
    parse_ballot,
    parse_question,
    parse_reply,
    parse_vote,
)

FOLDER = Path(__file__).parent


class Ram2cAgent(Agent):
    """An agent whose json-mode reply falls back to the text parser (which reads JSON objects too)
    when it does not validate: until every backend constrains decoding to the schema, a small model
    in json mode may still answer in plain text, and a usable answer is not thrown away."""

    def parse(self, text: str | None, mode: str = "text", **options: Any):
        try:
            return super().parse(text, mode, **options)
        except ParseError:
            if mode != "json":
                raise
            return super().parse(text, "text")

    def render(self, language: str | None = None, *, output_mode: str = "text", **vars: Any) -> list[Message]:
        """The exact messages; in json mode ``output_example`` is the output model's one-line example."""
        self._check_mode(output_mode)
        language = language or self.default_language
        example = self.output.EXAMPLES[language] if output_mode == "json" else ""
        return self.template.render(language, output_mode=output_mode, output_example=example, **vars)


class ConversationAgent(Ram2cAgent):
    """An agent whose prompt is its system block, then ``history`` (earlier turns), then its user block.

    The drafter is one: its rendered messages are exactly the prompt of the preference pair.
    """

    def render(self, language: str | None = None, *, output_mode: str = "text", **vars: Any) -> list[Message]:
        history: list[Message] = list(vars.pop("history", []) or [])
        messages = super().render(language, output_mode=output_mode, **vars)
        return messages[:-1] + history + messages[-1:]


def ballot_agent(n: int, *, max_tokens: int | None = None, **options: Any) -> Ram2cAgent:
    """The ballot of one expert on ``n`` documents (agent ``ballot``, role ``expert``)."""
    return Ram2cAgent(
        "ballot",
        FOLDER,
        partial(parse_ballot, n=n),
        role="expert",
        output=ballot_output(n),
        max_tokens=max_tokens,
        **options,
    )


def make_agents(
    *, max_tokens: dict[str, int] | None = None, ballot_sizes: int = 5, analysis_chars: int = 600, **options: Any
) -> dict[str, Agent]:
    """Every RAM2C agent by name; ``max_tokens`` per agent, ``options`` for all (attempts, retry
    temperature). Ballots are ``ballot:<n>`` for n = 1..``ballot_sizes`` documents (the schema and
    the parser know how many verdicts to expect); ``analysis_chars`` bounds the analysis of
    ``analyst_reviser`` in json mode."""
    tokens = max_tokens or {}
    parsers = {
        "topic_writer": parse_question,
        "student": parse_reply,
        "voter": parse_vote,
        "analyst": parse_analysis,
        "reviser": parse_reply,
        "analyst_reviser": parse_analysed_revision,
        "synthesizer": parse_reply,
    }
    outputs = {
        "topic_writer": QuestionOut,
        "voter": VoteOut,
        "analyst": AnalysisOut,
        "analyst_reviser": analysed_revision_output(analysis_chars),
    }
    roles = {"voter": "expert", "analyst": "expert", "reviser": "expert", "analyst_reviser": "expert"}
    agents: dict[str, Agent] = {
        name: Ram2cAgent(
            name,
            FOLDER,
            parser,
            role=roles.get(name),
            output=outputs.get(name, ReplyOut),
            max_tokens=tokens.get(name),
            **options,
        )
        for name, parser in parsers.items()
    }
    agents["drafter"] = ConversationAgent(
        "drafter", FOLDER, parse_reply, output=ReplyOut, max_tokens=tokens.get("drafter"), **options
    )
    for n in range(1, ballot_sizes + 1):
        agents[f"ballot:{n}"] = ballot_agent(n, max_tokens=tokens.get("ballot"), **options)
    return agents
