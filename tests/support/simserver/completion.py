"""What a simulated server answers to one chat request, apart from HTTP and timing.

:class:`Completer` turns a ``/v1/chat/completions`` body into the reply a model would give: for
``response_format`` ``json_schema`` a random instance of the schema (:mod:`.schema_sample`), for
``json_object`` an object of filler fields, otherwise runs of the prompt's own words (or what
``reply(body)`` returns);
``n`` choices; usage counted with the Qwen2 tokenizer (:mod:`.text`); a reply longer than
``max_tokens`` is cut there with ``finish_reason: length``, as an engine cuts it. Replies depend
only on the request body (the random generator is seeded with its hash), so a rerun, a shard or a
retry gets the same text: outputs stay comparable across runs.

Kept apart from the HTTP layer so that other endpoints (a batch API's input file lines) answer
through the same function.
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tests.support.simserver.schema_sample import sample
from tests.support.simserver.text import REPLY_HEADER_TOKENS, WORDS_EN, count_tokens, message_tokens, words_for

ReplyFn = Callable[[dict[str, Any]], "str | None"]
FREE_TEXT_WORDS = (20, 90)


@dataclass
class Prepared:
    """One request's reply before timing: the completion body and the engine's work."""

    choices: list[tuple[str, str]]  # (text, finish_reason)
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    body_hash: str


def body_hash(raw: bytes | dict[str, Any]) -> str:
    data = raw if isinstance(raw, bytes) else orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()[:32]


class PrefixCache:
    """Which message prefixes a server has seen lately (vLLM's automatic prefix caching, at message
    granularity): ``capacity_tokens`` of KV cache, least recently used prefixes evicted first."""

    def __init__(self, capacity_tokens: int = 400_000):
        self.capacity = capacity_tokens
        self._entries: OrderedDict[str, int] = OrderedDict()
        self._tokens = 0

    def lookup_and_insert(self, messages: list[dict[str, Any]], tokens: list[int]) -> int:
        """Tokens of the longest cached prefix of ``messages`` (then all of its prefixes are cached)."""
        digest = hashlib.sha256()
        cached, still = 0, True
        for message, n in zip(messages, tokens, strict=True):
            digest.update(orjson.dumps([message.get("role"), message.get("content")]))
            key = digest.hexdigest()
            if still and key in self._entries:
                self._entries.move_to_end(key)
                cached += n
                continue
            still = False
            if key not in self._entries:
                self._entries[key] = n
                self._tokens += n
        while self._tokens > self.capacity and self._entries:
            _, n = self._entries.popitem(last=False)
            self._tokens -= n
        return cached


class Completer:
    """Replies for chat bodies (see the module docstring); ``reply`` overrides free-text replies."""

    def __init__(self, *, reply: ReplyFn | None = None, prefix_cache: PrefixCache | None = None):
        self.reply = reply
        self.prefix_cache = prefix_cache

    def prepare(self, body: dict[str, Any], raw: bytes | None = None) -> Prepared:
        messages = body.get("messages") or []
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list")
        digest = body_hash(raw if raw is not None else body)
        rng = random.Random(digest)
        n = int(body.get("n") or 1)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        texts = [self._text(body, messages, rng) for _ in range(n)]
        counts = count_tokens(texts)
        choices = []
        for text, count in zip(texts, counts, strict=True):
            if count > max_tokens:
                text, count = _cut(text, max_tokens), max_tokens
                choices.append((text, "length"))
            else:
                choices.append((text, "stop"))
        per_message = message_tokens(messages)
        prompt = sum(per_message) + REPLY_HEADER_TOKENS
        cached = self.prefix_cache.lookup_and_insert(messages, per_message) if self.prefix_cache else 0
        cached = min(cached, prompt - 1)
        completion = sum(min(c, max_tokens) for c in counts)
        return Prepared(choices, prompt, cached, completion, digest)

    def _text(self, body: dict[str, Any], messages: list[dict[str, Any]], rng: random.Random) -> str:
        words = words_for(messages)
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema") or {}
            return orjson.dumps(sample(schema, rng, words)).decode()
        if fmt.get("type") == "json_object":
            return orjson.dumps({"answer": " ".join(rng.choice(words) for _ in range(8))}).decode()
        if self.reply is not None:
            text = self.reply(body)
            if text is not None:
                return text
        return quoted_reply(messages, rng, words)

    def completion_body(self, body: dict[str, Any], prepared: Prepared, index: int, created: int) -> dict[str, Any]:
        """The ``chat.completion`` object for ``prepared`` (usage with the cached prompt tokens)."""
        return {
            "id": f"chatcmpl-sim-{index}",
            "object": "chat.completion",
            "created": created,
            "model": body.get("model", "simulated"),
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
                for i, (text, reason) in enumerate(prepared.choices)
            ],
            "usage": {
                "prompt_tokens": prepared.prompt_tokens,
                "completion_tokens": prepared.completion_tokens,
                "total_tokens": prepared.prompt_tokens + prepared.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": prepared.cached_tokens},
            },
        }


def quoted_reply(messages: list[dict[str, Any]], rng: random.Random, words: list[str]) -> str:
    """Free text as a model often writes it: a few runs of the prompt's own words (its last user
    message), so a reply that should name something from the prompt (a type, an option) can."""
    last = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    cjk = words is not WORDS_EN
    source = list(last) if cjk else last.split()
    if not source:
        source = words
    target = rng.randint(*FREE_TEXT_WORDS) * (2 if cjk else 1)
    out: list[str] = []
    while len(out) < target:
        start = rng.randrange(len(source))
        out.extend(source[start : start + rng.randint(3, 12)])
    return ("" if cjk else " ").join(out[:target])


def _cut(text: str, tokens: int) -> str:
    """The first ``tokens`` tokens of ``text`` (binary search on characters; counts are monotone enough)."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens([text[:mid]])[0] <= tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low]
