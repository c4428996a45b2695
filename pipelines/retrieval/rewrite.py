"""Query rewriting for multi-query retrieval: an ordinary :class:`~pipelines.agents.agent.Agent`
(``query_rewriter``, templates ``prompts/query_rewriter.{en,zh}.j2``) writes ``n`` alternative
phrasings.

Render (:func:`render_rewrite_prompt`), call (:meth:`QueryRewriter.run`, through the agent, the
LLM runtime and its request cache, re-asking an unusable reply) and parse (:func:`parse_rewrites`)
are separate. A failed call or an unusable reply gives no rewrites (retrieval falls back to the
original query), is counted in ``failures`` and is kept in the agent record for the trace.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pipelines.agents.agent import Agent, AgentRecord, ParseError
from pipelines.llm.types import Message
from pipelines.retrieval.loaders import detect_language

log = logging.getLogger(__name__)

PROMPTS = Path(__file__).parent / "prompts"
AGENT = "query_rewriter"
LIST_MARK = re.compile(
    r"^\s*(?:[-*•·]+|\(?[0-9０-９]{1,2}[.)、．:：）]|[（(][0-9]{1,2}[)）]"
    r"|(?:query|rewrite|改写)\s*[0-9]*[:：])\s*",
    re.I,
)
WORDLIKE = re.compile(r"[A-Za-z\u3400-\u9fff]")


def _language(query: str, language: str) -> str:
    return detect_language(query) if language == "auto" else language


def render_rewrite_prompt(query: str, n: int, language: str = "auto") -> list[Message]:
    """The chat messages asking for ``n`` rewrites of ``query`` (template chosen by language)."""
    agent = Agent(AGENT, PROMPTS, str)
    return agent.render(_language(query, language), query=query.strip(), n=n)


def _clean(line: str) -> str:
    line = LIST_MARK.sub("", line.strip(), count=1).strip()
    return line.strip("\"'“”‘’「」`*").strip()


def _candidates(text: str) -> list[str]:
    """A JSON list, a JSON object with a ``rewrites`` list (json mode), or one candidate per line."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text.splitlines()
    if isinstance(data, dict):
        data = data.get("rewrites")
    return [str(x) for x in data] if isinstance(data, list) else []


def parse_rewrites(reply: str | None, n: int, original: str = "") -> list[str]:
    """At most ``n`` distinct rewrites from a reply: numbered/bulleted lines or a JSON list.

    Preamble lines ending with a colon, lines without letters or CJK characters, over-long lines
    and copies of the original query are dropped. Garbage or empty replies give ``[]``.
    """
    if not reply or not reply.strip():
        return []
    out: list[str] = []
    seen = {original.strip().lower()}
    for raw in _candidates(reply.strip()):
        line = _clean(raw)
        if not line or line.endswith((":", "：")) or not WORDLIKE.search(line) or len(line) > 300:
            continue
        key = line.lower()
        if key in seen:
            continue
        seen.add(key)
        out.append(line)
        if len(out) == n:
            break
    return out


def parse_rewrite_reply(reply: str, n: int) -> list[str]:
    """The agent's parser: like :func:`parse_rewrites`, but a reply with none raises ParseError
    (so the agent asks again)."""
    rewrites = parse_rewrites(reply, n)
    if not rewrites:
        raise ParseError(f"no usable rewrite in the reply (expected {n} numbered lines)")
    return rewrites


@dataclass
class RewriteOutcome:
    """The rewrites (the original query and its copies removed) and the agent's record (None when n = 0)."""

    rewrites: list[str]
    record: AgentRecord | None = None


class QueryRewriter:
    """Asks ``llm`` for ``n`` rewrites of a query through the ``query_rewriter`` agent; ``failures``
    counts queries that got none. ``temperature`` (None: the role's own) and ``max_tokens`` are the
    ``retrieval.rewrite_*`` params; a re-ask after a greedy call samples at ``retry_temperature``."""

    def __init__(
        self,
        llm,
        n: int = 2,
        *,
        language: str = "auto",
        max_tokens: int = 96,
        temperature: float | None = 0,
        max_attempts: int = 2,
        retry_temperature: float = 0.7,
    ):
        self.n = n
        self.language = language
        self.llm = llm
        if temperature is not None and getattr(llm, "default_params", None) is not None:
            self.llm = copy.copy(llm)  # same backend, cache and accounting; the rewriter's sampling
            self.llm.default_params = dataclasses.replace(llm.default_params, temperature=temperature)
        self.agent = Agent(
            AGENT,
            PROMPTS,
            partial(parse_rewrite_reply, n=n),
            role=AGENT,
            max_attempts=max_attempts,
            max_tokens=max_tokens,
            retry_temperature=retry_temperature,
        )
        self.failures = 0

    async def run(self, query: str, *, sample_index: int = 0) -> RewriteOutcome:
        """Rewrites of ``query`` and the agent record (prompt, replies, usage, error) for the trace."""
        if self.n == 0:
            return RewriteOutcome([])
        variables = {"query": query.strip(), "n": self.n, "language": _language(query, self.language)}
        record = await self.agent.run(self.llm, variables, sample_index=sample_index)
        seen = query.strip().lower()
        rewrites = [r for r in (record.parsed or []) if r.lower() != seen] if record.ok else []
        if not rewrites:
            log.warning("query rewrite gave nothing usable (%s); using the original query only", record.error)
            self.failures += 1
        return RewriteOutcome(rewrites, record)

    async def rewrite(self, query: str) -> list[str]:
        """Just the rewrites of ``query`` (``[]`` when the call failed or the reply was unusable)."""
        return (await self.run(query)).rewrites
