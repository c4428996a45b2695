"""Persistent request cache: SQLite in WAL mode, one row per finished LLM call.

Key = sha256 over (model identity, messages, sampling parameters, sample index). A stage killed
halfway and started again finds every finished call here, so it repeats none of them and, since
replies are replayed verbatim, produces the same outputs. Each ``put`` commits on its own, so a
kill loses at most the calls in flight.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from pipelines.llm.types import ChatResult, Message, SamplingParams


def request_key(identity: str, messages: list[Message], params: SamplingParams, sample_index: int) -> str:
    """Stable hex key of one request; any change in model, prompt, sampling or index changes it."""
    payload = json.dumps(
        {"model": identity, "messages": messages, "params": params.to_dict(), "sample": sample_index},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class RequestCache:
    """SQLite-backed map from request key to :class:`ChatResult` (thread-safe, multi-process safe)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, model TEXT, result TEXT NOT NULL,"
            " created REAL DEFAULT ((julianday('now') - 2440587.5) * 86400.0))"
        )
        self._db.commit()

    def get(self, key: str) -> ChatResult | None:
        """The stored result for ``key``, marked ``cached=True``, or None."""
        with self._lock:
            row = self._db.execute("SELECT result FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        result = ChatResult.from_dict(json.loads(row[0]))
        result.cached = True
        return result

    def put(self, key: str, result: ChatResult) -> None:
        """Store a finished call and commit at once (durable across a kill)."""
        data: dict[str, Any] = result.to_dict()
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls (key, model, result) VALUES (?, ?, ?)",
                (key, result.model, json.dumps(data, ensure_ascii=False)),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
