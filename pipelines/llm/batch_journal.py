"""Which batches a stage has submitted and which request each line carries, so a rerun re-attaches.

One small SQLite file beside the request cache (``<cache>.batches.sqlite``):

- ``batches``: one row per submitted batch (its id, the server, the input file, when), with
  ``finished`` set once its results were handed out;
- ``items``: one row per request line (its ``custom_id``, the batch), with ``result`` filled for
  lines of a finished batch whose caller was not there to take it (a rerun's call finds it here).

A batch and all its items are written in one transaction right after the server created it and
before any waiting, so a stage killed while it waits finds them on rerun and polls the same batch
instead of submitting its requests again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

import orjson

from pipelines.llm.config import OpenAIBackendConfig
from pipelines.llm.types import ChatResult

log = logging.getLogger(__name__)


class BatchJournal:
    """The journal file (thread-safe; every write commits at once)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, url TEXT NOT NULL, input_file_id TEXT,"
            " created REAL NOT NULL, finished INTEGER NOT NULL DEFAULT 0, status TEXT)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS items (custom_id TEXT NOT NULL, batch_id TEXT NOT NULL, result TEXT,"
            " PRIMARY KEY (custom_id, batch_id))"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS items_by_id ON items (custom_id)")
        self._db.commit()

    def record(self, batch_id: str, *, url: str, input_file_id: str, custom_ids: list[str]) -> None:
        """A new batch and its lines, in one transaction."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO batches (batch_id, url, input_file_id, created) VALUES (?, ?, ?, ?)",
                (batch_id, url, input_file_id, time.time()),
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO items (custom_id, batch_id) VALUES (?, ?)", [(c, batch_id) for c in custom_ids]
            )

    def open_batches(self) -> list[tuple[str, str, list[str]]]:
        """``(batch_id, url, custom_ids)`` of every batch whose results were not handed out yet."""
        with self._lock:
            batches = self._db.execute(
                "SELECT batch_id, url FROM batches WHERE finished = 0 ORDER BY created"
            ).fetchall()
            out = []
            for batch_id, url in batches:
                rows = self._db.execute("SELECT custom_id FROM items WHERE batch_id = ?", (batch_id,)).fetchall()
                out.append((batch_id, url, [r[0] for r in rows]))
        return out

    def finish(self, batch_id: str, *, status: str, unclaimed: dict[str, ChatResult]) -> None:
        """Mark ``batch_id`` done and keep the results nobody waited for (one transaction)."""
        with self._lock, self._db:
            self._db.executemany(
                "UPDATE items SET result = ? WHERE custom_id = ? AND batch_id = ?",
                [(orjson.dumps(r.to_dict()).decode(), c, batch_id) for c, r in unclaimed.items()],
            )
            self._db.execute("UPDATE batches SET finished = 1, status = ? WHERE batch_id = ?", (status, batch_id))

    def take_result(self, custom_id: str) -> ChatResult | None:
        """A kept result for ``custom_id`` (from a finished batch), removed from the journal once read
        (the caller's request cache keeps it from then on)."""
        with self._lock:
            row = self._db.execute(
                "SELECT batch_id, result FROM items WHERE custom_id = ? AND result IS NOT NULL LIMIT 1", (custom_id,)
            ).fetchone()
            if row is None:
                return None
            with self._db:
                self._db.execute(
                    "UPDATE items SET result = NULL WHERE custom_id = ? AND batch_id = ?", (custom_id, row[0])
                )
        return ChatResult.from_dict(orjson.loads(row[1]))

    def counts(self) -> dict[str, int]:
        with self._lock:
            batches, done = self._db.execute("SELECT COUNT(*), COALESCE(SUM(finished), 0) FROM batches").fetchone()
            items = self._db.execute("SELECT COUNT(*) FROM items").fetchone()[0]
        return {"batches": batches, "finished": done, "items": items}

    def close(self) -> None:
        with self._lock:
            self._db.close()


def journal_path(spec: OpenAIBackendConfig, *, where: str, cache_path: str | None) -> Path | None:
    """Where batch mode records its batches: ``batch.journal``, else beside the request cache; None
    (with a warning) when neither is set: a killed run then submits its calls again."""
    if spec.batch.journal:
        return Path(spec.batch.journal)
    if cache_path:
        cache = Path(cache_path)
        return cache.with_name(cache.stem + ".batches.sqlite")
    log.warning(
        "%s: mode batch without llm.cache or %s.batch.journal: the batches are not recorded, so a run "
        "killed while it waits submits its calls again; set llm.cache or batch.journal",
        where,
        where,
    )
    return None
