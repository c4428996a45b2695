"""The RAM2C agents, one module per role holding its template name(s) (``<name>.<lang>.j2`` beside
this file), its json-mode output model and its parser:

    topic_writer  passage, level, direction      -> one discussion question (Q)
    student       persona, topic, teacher reply  -> the student's answer (A)
    drafter       the pair's prompt messages     -> the raw reply (R2, rejected)
    ballot        expert, context, all documents -> yes / no per document (group reflection, one call)
    voter         expert, context, one document  -> yes / no (group reflection, one call per document)
    analyst       expert, context, its reference -> explicit analysis (proactive analysis); also
                  ``analyst_reviser``: its analysis, then its revision, in one reply
                  (``expert_call: joint``, the default: the analysis is the revision's chain of thought)
    reviser       expert, context, its analysis  -> that expert's revision
    synthesizer   context, the group's revisions -> the group's reply (E group's = R1, chosen)

Shared by the roles: :mod:`~pipelines.ram2c.agents.agent` (the agent class, the templates' folder),
:mod:`~pipelines.ram2c.agents.reply` (the reply to the student, the answer of four roles) and
:mod:`~pipelines.ram2c.agents.reply_text` (the JSON object in a reply, its cleaned text).

Every parser takes plain text or a JSON object, so the same agents work in text and json modes.
In json mode the prompt shows a one-line example of the reply (``EXAMPLES`` of
the output model, in the prompt's language) instead of the pretty JSON schema, which cost ~100
prompt tokens per call; the schema itself still goes to the backend (constrained decoding).
"""

from __future__ import annotations

from typing import Any

from pipelines.agents import Agent
from pipelines.ram2c.agents.analyst import make_analyst, make_analyst_reviser
from pipelines.ram2c.agents.ballot import make_ballot
from pipelines.ram2c.agents.drafter import make_drafter
from pipelines.ram2c.agents.reviser import make_reviser
from pipelines.ram2c.agents.student import make_student
from pipelines.ram2c.agents.synthesizer import make_synthesizer
from pipelines.ram2c.agents.topic_writer import make_topic_writer
from pipelines.ram2c.agents.voter import make_voter


def make_agents(
    *, max_tokens: dict[str, int] | None = None, ballot_sizes: int = 5, analysis_chars: int = 600, **options: Any
) -> dict[str, Agent]:
    """Every RAM2C agent by name; ``max_tokens`` per agent, ``options`` for all (attempts, retry
    temperature). Ballots are ``ballot:<n>`` for n = 1..``ballot_sizes`` documents (the schema and
    the parser know how many verdicts to expect); ``analysis_chars`` bounds the analysis of
    ``analyst_reviser`` in json mode."""
    tokens = max_tokens or {}
    agents: dict[str, Agent] = {
        "topic_writer": make_topic_writer(max_tokens=tokens.get("topic_writer"), **options),
        "student": make_student(max_tokens=tokens.get("student"), **options),
        "voter": make_voter(max_tokens=tokens.get("voter"), **options),
        "analyst": make_analyst(max_tokens=tokens.get("analyst"), **options),
        "reviser": make_reviser(max_tokens=tokens.get("reviser"), **options),
        "analyst_reviser": make_analyst_reviser(
            analysis_chars=analysis_chars, max_tokens=tokens.get("analyst_reviser"), **options
        ),
        "synthesizer": make_synthesizer(max_tokens=tokens.get("synthesizer"), **options),
        "drafter": make_drafter(max_tokens=tokens.get("drafter"), **options),
    }
    for n in range(1, ballot_sizes + 1):
        agents[f"ballot:{n}"] = make_ballot(n, max_tokens=tokens.get("ballot"), **options)
    return agents
