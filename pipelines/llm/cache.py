"""Persistent request cache: SQLite in WAL mode, one row per finished LLM call.

Key = sha256 over (model identity, messages, sampling parameters, sample index, attempt, call tag).
A stage killed halfway and started again finds every finished call here, so it repeats none of
them and, since replies are replayed verbatim (with the usage they had when made), produces the
same outputs and the same token accounting. Each ``put`` commits on its own, so a kill loses at
most the calls in flight.

The event loop never waits on a lock: :meth:`RequestCache.aget` reads on the loop through a
connection whose busy timeout is zero (a WAL read of one key takes microseconds and is not blocked
by writers; if it ever reports busy, the read is retried in a thread), and :meth:`RequestCache.aput`
hands the row to one writer thread (the rows of every call finishing in one turn of the event loop
together), which commits whatever rows are waiting in one transaction (so thousands of calls
finishing together cost a few commits) with a short busy timeout (``timeout_s``); ``aput`` returns
once its row is committed. A read or write that still finds the file locked by another process is
skipped with a warning (a miss repeats the call; a skipped write only means a rerun repeats it). A
file that is not a SQLite database raises :class:`CacheError` naming the file and the fix.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import queue
import sqlite3
import threading
from pathlib import Path
from typing import Any

import orjson

from pipelines.llm.types import ChatResult, LLMError, Message, SamplingParams

log = logging.getLogger(__name__)


class CacheError(LLMError):
    """The request cache file cannot be used (not SQLite, damaged); the message names it and the fix."""


def _dumps(value: Any) -> str:
    """The key's JSON form of a value: sorted keys, no spaces, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


_SCHEMA_TEXT: dict[int, tuple[dict[str, Any], str]] = {}  # id(schema) -> (schema, its _dumps text)
_SCHEMA_BY_CONTENT: dict[bytes, str] = {}  # orjson bytes of a schema -> its _dumps text


def _schema_text(schema: dict[str, Any] | None) -> str:
    """``_dumps(schema)``, worked out once per schema: an agent sends the same schema object with
    every call (the entry holds it, so its id is not reused while cached), or an equal one built
    anew per call (a per-call pydantic model), found by its orjson form (a few microseconds)."""
    if schema is None:
        return "null"
    cached = _SCHEMA_TEXT.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    content = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    text = _SCHEMA_BY_CONTENT.get(content)
    if text is None:
        text = _dumps(schema)
        if len(_SCHEMA_BY_CONTENT) >= 1024:
            _SCHEMA_BY_CONTENT.clear()
        _SCHEMA_BY_CONTENT[content] = text
    if len(_SCHEMA_TEXT) >= 256:
        _SCHEMA_TEXT.clear()
    _SCHEMA_TEXT[id(schema)] = (schema, text)
    return text


def _messages_text(messages: list[Message]) -> str:
    """``_dumps(messages)``; orjson writes the same text for dicts of strings (and lists, bools,
    ints, None), several times faster; anything else (floats) goes through ``_dumps``."""
    for message in messages:
        for value in message.values():
            if not isinstance(value, str):
                return _dumps(messages)
    return orjson.dumps(messages, option=orjson.OPT_SORT_KEYS).decode()


def _string(value: str) -> str:
    return orjson.dumps(value).decode()  # the same text as _dumps for a str


def _scalar(value: Any) -> str:
    """``_dumps`` of None, a bool, an int or a float (floats as ``float.__repr__``, as json writes them)."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return _dumps(value)
    if isinstance(value, int):
        return str(value)
    return repr(value) if math.isfinite(value) else _dumps(value)


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

    The sha256 of ``_dumps({"model", "messages", "params", "sample"[, "attempt"][, "tag"]})``;
    ``attempt`` and ``tag`` enter the key only when set, so the keys of first attempts without a
    tag are the ones earlier releases wrote (existing caches stay valid). The text is put together
    from its parts in sorted key order (the schema's text reused across calls, the messages written
    by orjson, the sampling fields one by one), byte for byte what ``_dumps`` of the whole payload
    gives (tested).
    """
    head = '{"attempt":' + _scalar(attempt) + "," if attempt else "{"
    parts = [head, '"messages":', _messages_text(messages), ',"model":', _string(identity)]
    parts += [',"params":{"json_schema":', _schema_text(params.json_schema)]
    parts += [',"max_tokens":', _scalar(params.max_tokens), ',"n":', _scalar(params.n)]
    parts += [',"seed":', _scalar(params.seed)]
    parts += [',"stop":', orjson.dumps(list(params.stop)).decode()]
    parts += [',"temperature":', _scalar(params.temperature), ',"top_p":', _scalar(params.top_p), "}"]
    parts += [',"sample":', _scalar(sample_index)]
    if tag:
        parts += [',"tag":', _string(tag)]
    parts.append("}")
    return hashlib.sha256("".join(parts).encode("utf-8")).hexdigest()


def _is_locked(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


class RequestCache:
    """SQLite-backed map from request key to :class:`ChatResult` (thread-safe, multi-process safe)."""

    def __init__(self, path: Path | str, *, timeout_s: float = 5.0):
        self.path = Path(path)
        self.skipped_writes = 0  # puts given up because another process held the lock
        self._lock = threading.Lock()
        self._check_path()
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
            self._reader = sqlite3.connect(str(self.path), check_same_thread=False, timeout=0.0)
        except sqlite3.Error as exc:
            self._db.close()
            raise self._error(exc) from exc
        self._reader_lock = threading.Lock()
        self._pending: queue.SimpleQueue = queue.SimpleQueue()  # (rows, loop, futures) or None (stop)
        self._gathering: dict[asyncio.AbstractEventLoop, tuple[list, list]] = {}  # per loop, this iteration's rows
        self.in_flight: dict[str, asyncio.Future] = {}  # key -> the reply of a call on its way (LLM.chat)
        self._writer = threading.Thread(target=self._write_loop, name="edumas-cache-writer", daemon=True)
        self._writer.start()

    def _check_path(self) -> None:
        """The cache's folder exists (made here) and the path is not a folder: else a :class:`CacheError`."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise CacheError(
                f"request cache {self.path}: a part of its folder is a file, not a folder; set llm.cache to a file "
                "path under a folder (e.g. cache/llm.sqlite)"
            ) from None
        if self.path.is_dir():
            raise CacheError(
                f"request cache {self.path} is a folder; set llm.cache to a file path (e.g. {self.path / 'llm.sqlite'})"
            )

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
            return self._lookup(self._db, self._lock, key)
        except sqlite3.Error as exc:
            if _is_locked(exc):
                log.warning("request cache %s stayed locked (%s): treating the lookup as a miss", self.path, exc)
                return None
            raise self._error(exc) from exc

    @staticmethod
    def _lookup(db: sqlite3.Connection, lock: threading.Lock, key: str) -> ChatResult | None:
        with lock:
            row = db.execute("SELECT result FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        result = ChatResult.from_dict(orjson.loads(row[0]))
        result.cached = True
        return result

    def put(self, key: str, result: ChatResult) -> None:
        """Store a finished call and commit at once (durable across a kill)."""
        error = self._commit([(key, result)])
        if error is not None:
            raise error

    def _commit(self, rows: list[tuple[str, ChatResult]]) -> CacheError | None:
        """Write ``rows`` in one transaction; a lock held past the timeout skips them (with a warning)."""
        data = [(key, r.model, orjson.dumps(r.to_dict()).decode()) for key, r in rows]
        try:
            with self._lock:
                try:
                    self._db.executemany("INSERT OR REPLACE INTO calls (key, model, result) VALUES (?, ?, ?)", data)
                    self._db.commit()
                except sqlite3.Error:
                    self._db.rollback()
                    raise
        except sqlite3.Error as exc:
            if _is_locked(exc):
                self.skipped_writes += len(rows)
                log.warning("request cache %s stayed locked (%s): %d call(s) not cached", self.path, exc, len(rows))
                return None
            return self._error(exc)
        return None

    def _write_loop(self) -> None:
        """The writer thread: commit every row waiting, then wake the callers, once per event loop."""
        while True:
            items = [self._pending.get()]
            while len(items) < 64:
                try:
                    items.append(self._pending.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is None for item in items)
            items = [item for item in items if item is not None]
            if items:
                error = self._commit([row for rows, _, _ in items for row in rows])
                by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future]] = {}
                for _, loop, futures in items:
                    by_loop.setdefault(loop, []).extend(futures)
                for loop, futures in by_loop.items():
                    try:
                        loop.call_soon_threadsafe(_settle, futures, error)
                    except RuntimeError:  # that loop is closed: nobody waits any more
                        pass
            if stop:
                return

    async def aget(self, key: str) -> ChatResult | None:
        """:meth:`get` without ever waiting on a lock in the event loop (see the module docstring)."""
        try:
            return self._lookup(self._reader, self._reader_lock, key)
        except sqlite3.Error as exc:
            if not _is_locked(exc):
                raise self._error(exc) from exc
        return await asyncio.to_thread(self.get, key)

    async def aput(self, key: str, result: ChatResult) -> None:
        """Hand ``result`` to the writer thread and wait until it is committed (or skipped).

        The rows of every call finishing in one turn of the event loop go over together (one
        hand-over, so the writer thread wakes once per turn instead of once per call)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        gathering = self._gathering.get(loop)
        if gathering is None:
            gathering = self._gathering[loop] = ([], [])
            loop.call_soon(self._hand_over, loop)
        gathering[0].append((key, result))
        gathering[1].append(future)
        await future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        rows, futures = self._gathering.pop(loop)
        self._pending.put((rows, loop, futures))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        if self._writer.is_alive():
            self._pending.put(None)
            self._writer.join()
        with self._lock, self._reader_lock:
            self._reader.close()
            self._db.close()


def _settle(futures: list[asyncio.Future], error: CacheError | None) -> None:
    for future in futures:
        if not future.done():
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
