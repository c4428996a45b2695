"""Query rewriting for multi-query retrieval: the LLM writes ``n`` alternative phrasings.

Render (:meth:`QueryRewriter.render`), call (:meth:`QueryRewriter.rewrite`, through the LLM
runtime and its request cache) and parse (:func:`parse_rewrites`) are separate. A failed call or
an unusable reply gives no rewrites (retrieval falls back to the original query) and is counted.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from pipelines.llm.client import LLM
from pipelines.llm.types import LLMError, Message, SamplingParams
from pipelines.retrieval.loaders import detect_language

log = logging.getLogger(__name__)

PROMPTS = Path(__file__).parent / "prompts"
_ENV = Environment(loader=FileSystemLoader(PROMPTS), undefined=StrictUndefined, keep_trailing_newline=False)
LIST_MARK = re.compile(
    r"^\s*(?:[-*•·]+|\(?[0-9０-９]{1,2}[.)、．:：）]|[（(][0-9]{1,2}[)）]"
    r"|(?:query|rewrite|改写)\s*[0-9]*[:：])\s*",
    re.I,
)
WORDLIKE = re.compile(r"[A-Za-z\u3400-\u9fff]")


def render_rewrite_prompt(query: str, n: int, language: str = "auto") -> list[Message]:
    """The chat messages asking for ``n`` rewrites of ``query`` (template chosen by language)."""
    lang = detect_language(query) if language == "auto" else language
    text = _ENV.get_template(f"rewrite.{lang}.j2").render(query=query.strip(), n=n)
    return [{"role": "user", "content": text}]


def _clean(line: str) -> str:
    line = LIST_MARK.sub("", line.strip(), count=1).strip()
    return line.strip("\"'“”‘’「」`*").strip()


def parse_rewrites(reply: str | None, n: int, original: str = "") -> list[str]:
    """At most ``n`` distinct rewrites from a reply: numbered/bulleted lines or a JSON list.

    Preamble lines ending with a colon, lines without letters or CJK characters, over-long lines
    and copies of the original query are dropped. Garbage or empty replies give ``[]``.
    """
    if not reply or not reply.strip():
        return []
    text = reply.strip()
    candidates: list[str]
    try:
        data = json.loads(text)
        candidates = [str(x) for x in data] if isinstance(data, list) else []
    except (json.JSONDecodeError, ValueError):
        candidates = text.splitlines()
    out: list[str] = []
    seen = {original.strip().lower()}
    for raw in candidates:
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


class QueryRewriter:
    """Asks ``llm`` for ``n`` rewrites of a query; ``failures`` counts calls that gave none."""

    def __init__(self, llm: LLM, n: int = 2, *, language: str = "auto", max_tokens: int = 96, temperature: float = 0):
        self.llm = llm
        self.n = n
        self.language = language
        self.params = SamplingParams(temperature=temperature, max_tokens=max_tokens)
        self.failures = 0

    async def rewrite(self, query: str) -> list[str]:
        if self.n == 0:
            return []
        try:
            result = await self.llm.chat(render_rewrite_prompt(query, self.n, self.language), self.params)
        except LLMError as exc:
            log.warning("query rewrite failed (%s); using the original query only", exc)
            self.failures += 1
            return []
        rewrites = parse_rewrites(result.text, self.n, query)
        if not rewrites:
            log.warning("query rewrite reply unusable: %r", (result.text or "")[:200])
            self.failures += 1
        return rewrites
