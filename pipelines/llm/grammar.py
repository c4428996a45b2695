"""JSON-schema constrained decoding for the transformers backend, on xgrammar.

``SchemaGrammars(tokenizer, vocab_size=..., stop_token_ids=...)`` compiles a JSON schema into an
xgrammar grammar for ONE tokenizer: ``compile(schema) -> CompiledGrammar``, once per schema (the
schema's JSON text, key order kept, is the cache key: property order is the order the grammar
emits). A schema xgrammar cannot compile raises ``LLMError("json_schema cannot be compiled: ...")``
(remembered too, so a bad schema fails fast every time). Counters: ``hits``, ``misses``,
``compile_seconds`` (all misses together) and ``last_compile_seconds``. JSON is compiled compact
(no free whitespace: a small model cannot loop on blanks), one line, ``", "`` and ``": "``
separators, no properties beyond the schema.

``GrammarMask(grammars, ended_at)`` is a logits processor for ONE ``generate`` call: row ``i`` is
constrained by ``grammars[i]`` (``None``: unconstrained). At each step it feeds every live
constrained row's last token to the row's own matcher, fills a token bitmask and sets every token
the grammar forbids to ``-inf``. The stop tokens (the model's EOS ids) are allowed only where the
grammar accepts the text so far, and are then the only tokens allowed, so a row ends with EOS
exactly when its JSON is complete. Rows that ended (``ended_at[i]`` set by the stopping criterion,
or the matcher terminated on EOS) are left alone. ``rejected`` counts tokens a matcher refused
(0 unless another processor overrode the mask).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from pipelines.llm.types import LLMError

log = logging.getLogger(__name__)

_CPP_PREFIX = re.compile(r"^\[[\d:]+\] \S+:\d+: ")


def schema_key(schema: dict[str, Any]) -> str:
    """Cache key of ``schema``: its compact JSON text, key order kept (order is meaningful)."""
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def _clean_error(exc: Exception) -> str:
    """xgrammar's message without its C++ timestamp and source location."""
    return _CPP_PREFIX.sub("", str(exc).strip()) or type(exc).__name__


class SchemaGrammars:
    """Compiled JSON-schema grammars for one tokenizer, each schema compiled once (thread-safe).

    The ``max_cached`` most recently used grammars are kept: agents whose schema changes per call
    (e.g. KGC spans limited to the sentence) would otherwise grow the cache with every sample."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        vocab_size: int,
        stop_token_ids: Sequence[int],
        threads: int = 2,
        max_cached: int = 512,
    ):
        import xgrammar as xgr

        started = time.perf_counter()
        self.tokenizer_info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=sorted(stop_token_ids)
        )
        self.vocab_size = vocab_size
        self._compiler = xgr.GrammarCompiler(self.tokenizer_info, max_threads=threads, cache_enabled=False)
        self.setup_seconds = time.perf_counter() - started
        self._compiled: OrderedDict[str, Any] = OrderedDict()  # schema key -> CompiledGrammar | LLMError
        self.max_cached = max_cached
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.compile_seconds = 0.0  # a sum, not a list: per-call schemas (KGC spans) miss once per call
        self.last_compile_seconds = 0.0

    def compile(self, schema: dict[str, Any]) -> Any:
        """The grammar of ``schema`` (compiled on first use); LLMError if xgrammar rejects it."""
        key = schema_key(schema)
        with self._lock:
            found = self._compiled.get(key)
            if found is None:
                found = self._compile_new(key)
                self._compiled[key] = found
                while len(self._compiled) > self.max_cached:
                    self._compiled.popitem(last=False)
            else:
                self.hits += 1
                self._compiled.move_to_end(key)
        if isinstance(found, LLMError):
            raise found
        return found

    def _compile_new(self, key: str) -> Any:
        self.misses += 1
        started = time.perf_counter()
        try:
            compiled = self._compiler.compile_json_schema(key, any_whitespace=False, strict_mode=True)
        except Exception as exc:  # xgrammar raises RuntimeError/ValueError with a C++ message
            compiled = LLMError(f"json_schema cannot be compiled: {_clean_error(exc)}")
        self.last_compile_seconds = time.perf_counter() - started
        self.compile_seconds += self.last_compile_seconds
        if isinstance(compiled, LLMError):
            log.warning("%s (schema %s)", compiled, key[:200])
        return compiled


class GrammarMask:
    """Logits processor masking each constrained row of one batched ``generate`` to its grammar."""

    def __init__(self, grammars: Sequence[Any | None], ended_at: Sequence[int | None]):
        import xgrammar as xgr

        self._xgr = xgr
        self.rows = [i for i, grammar in enumerate(grammars) if grammar is not None]
        self.matchers: dict[int, Any] = {i: xgr.GrammarMatcher(grammars[i]) for i in self.rows}
        self.ended_at = ended_at  # the stopping criterion's list: a row with a value has ended
        self.vocab_size = grammars[self.rows[0]].tokenizer_info.vocab_size if self.rows else 0
        self.bitmask = xgr.allocate_token_bitmask(len(grammars), self.vocab_size) if self.rows else None
        self.started = False
        self.rejected = 0

    def __bool__(self) -> bool:
        return bool(self.rows)

    def _live(self, row: int) -> bool:
        matcher = self.matchers[row]
        return self.ended_at[row] is None and matcher is not None and not matcher.is_terminated()

    def __call__(self, input_ids, scores):
        if self.started:  # the last column holds the tokens picked at the previous step
            last = input_ids[:, -1].tolist()
            for row in self.rows:
                if self._live(row) and not self.matchers[row].accept_token(last[row]):
                    self.rejected += 1
                    self.matchers[row] = None  # cannot be constrained any more
                    log.warning("grammar matcher refused token %d in row %d; row left unconstrained", last[row], row)
        self.started = True
        live = [row for row in self.rows if self._live(row)]
        if not live:
            return scores
        for row in live:
            self.matchers[row].fill_next_token_bitmask(self.bitmask, row)
        bitmask = self.bitmask if scores.device.type == "cpu" else self.bitmask.to(scores.device, non_blocking=True)
        self._xgr.apply_token_bitmask_inplace(scores, bitmask, vocab_size=self.vocab_size, indices=live)
        return scores
