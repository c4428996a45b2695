"""Persistent request cache: SQLite in WAL mode, one row per finished LLM call.

Key = sha256 over (model identity, messages, sampling parameters, sample index, attempt, call tag).
A stage killed halfway and started again finds every finished call here, so it repeats none of
them and, since replies are replayed verbatim (with the usage they had when made), produces the
same outputs and the same token accounting. Each ``put`` commits on its own, so a kill loses at
most the calls in flight.

The event loop never waits on SQLite: :meth:`RequestCache.aget` / :meth:`RequestCache.aput` run
on one cache thread, and the busy timeout is short (``timeout_s``). A read or write that still
finds the file locked by another process is skipped with a warning (a miss repeats the call; a
skipped write only means a rerun repeats it). A file that is not a SQLite database raises
:class:`CacheError` naming the file and the fix.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pipelines.llm.types import ChatResult, LLMError, Message, SamplingParams

log = logging.getLogger(__name__)


class CacheError(LLMError):
    """The request cache file cannot be used (not SQLite, damaged); the message names it and the fix."""


def request_key(
    identity: str,
    messages: list[Message],
    params: SamplingParams,
    sample_index: int,
    *,
    attempt: int = 0,
    tag: str = "",
) -> str:
    """Stable hex key of one request; any change in model, prompt, sampling, index, attempt or tag changes it.

    ``attempt`` and ``tag`` enter the key only when set, so the keys of first attempts without a
    tag are the ones earlier releases wrote (existing caches stay valid).
    """
    payload: dict[str, Any] = {
        "model": identity,
        "messages": messages,
        "params": params.to_dict(),
        "sample": sample_index,
    }
    if attempt:
        payload["attempt"] = attempt
    if tag:
        payload["tag"] = tag
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_locked(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


class RequestCache:
    """SQLite-backed map from request key to :class:`ChatResult` (thread-safe, multi-process safe)."""

    def __init__(self, path: Path | str, *, timeout_s: float = 5.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.skipped_writes = 0  # puts given up because another process held the lock
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="edumas-cache")
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=timeout_s)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, model TEXT, result TEXT NOT NULL,"
                " created REAL DEFAULT ((julianday('now') - 2440587.5) * 86400.0))"
            )
            self._db.execute("SELECT key, result FROM calls LIMIT 1").fetchall()
            self._db.commit()
        except sqlite3.Error as exc:
            self._db.close()
            self._executor.shutdown(wait=False)
            raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> CacheError:
        if _is_locked(exc):
            return CacheError(
                f"request cache {self.path} is locked by another process ({exc}); wait for the other run "
                "to finish, or give this run its own llm.cache file"
            )
        return CacheError(
            f"request cache {self.path} is not a usable SQLite database ({type(exc).__name__}: {exc}); "
            f"move it away (mv {self.path} {self.path}.broken) and run again: the run then repeats the calls it held"
        )

    def get(self, key: str) -> ChatResult | None:
        """The stored result for ``key``, marked ``cached=True``, or None (also when the file stays locked)."""
        try:
            with self._lock:
                row = self._db.execute("SELECT result FROM calls WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            if _is_locked(exc):
                log.warning("request cache %s stayed locked (%s): treating the lookup as a miss", self.path, exc)
                return None
            raise self._error(exc) from exc
        if row is None:
            return None
        result = ChatResult.from_dict(json.loads(row[0]))
        result.cached = True
        return result

    def put(self, key: str, result: ChatResult) -> None:
        """Store a finished call and commit at once (durable across a kill)."""
        data: dict[str, Any] = result.to_dict()
        try:
            with self._lock:
                try:
                    self._db.execute(
                        "INSERT OR REPLACE INTO calls (key, model, result) VALUES (?, ?, ?)",
                        (key, result.model, json.dumps(data, ensure_ascii=False)),
                    )
                    self._db.commit()
                except sqlite3.Error:
                    self._db.rollback()
                    raise
        except sqlite3.Error as exc:
            if _is_locked(exc):
                self.skipped_writes += 1
                log.warning("request cache %s stayed locked (%s): this call is not cached", self.path, exc)
                return
            raise self._error(exc) from exc

    async def aget(self, key: str) -> ChatResult | None:
        """:meth:`get` on the cache thread: the event loop keeps running while SQLite works."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.get, key)

    async def aput(self, key: str, result: ChatResult) -> None:
        """:meth:`put` on the cache thread."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self.put, key, result)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            self._db.close()
