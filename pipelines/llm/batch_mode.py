"""``mode: batch`` of the OpenAI-compatible backend: calls collected into waves, sent as provider batches.

Each call becomes one line of a batch input file (``custom_id``: a hash of the request key and the
encoded body, so a rerun's identical call has the same id). The collector gathers the calls of a
wave and submits them when the wave is complete (:func:`pipelines.llm.waves.quiescent`, checked
every ``settle_s`` and true twice in a row), when ``max_requests`` are waiting, or ``max_wait_s``
after the wave's first call; a wave larger than ``max_requests`` lines or ``max_file_bytes`` goes
out as several batches. Each batch is uploaded (``POST /files``), created (``POST /batches``),
recorded in the journal (:mod:`pipelines.llm.batch_journal`) and then polled every
``poll_interval_s`` until it ends; its output and error files resolve the waiting calls. Expired
and retryable failed lines go into the next wave, or online, or fail (``on_item_failure``), at
most ``max_item_retries`` times; a call that fails for good raises :class:`LLMError` with every
error its line had (the agent's trace row keeps it). On start, batches the journal holds as open
(a run killed while waiting) are polled again and their lines handed to the calls that ask for
them; results nobody asked for stay in the journal for a later call.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import orjson

from pipelines.llm.batch_journal import BatchJournal
from pipelines.llm.batch_protocol import (
    TERMINAL,
    ItemOutcome,
    batch_errors,
    input_line,
    parse_output,
    split,
    upload_form,
)
from pipelines.llm.limits import current
from pipelines.llm.openai_protocol import RETRYABLE_STATUS, server_message
from pipelines.llm.types import ChatResult, LLMError, Message, SamplingParams
from pipelines.llm.waves import parked, quiescent

log = logging.getLogger(__name__)


class BatchHost(Protocol):
    """What the batch side uses of its :class:`~pipelines.llm.openai_backend.OpenAIBackend` (named here
    so that this module does not import the backend that imports it)."""

    spec: Any
    _headers: dict[str, str]

    def payload(self, messages: list[Message], params: SamplingParams, mode: str | None = None) -> dict[str, Any]: ...

    async def chat_online(self, messages: list[Message], params: SamplingParams) -> ChatResult: ...

    async def _bind_loop(self) -> None: ...

    def _session_for_loop(self) -> aiohttp.ClientSession: ...

    def _scrub(self, text: str) -> str: ...

    def _backoff(self, attempt: int, retry_after: float | None) -> float: ...


class BatchRequestError(LLMError):
    """A request of the batch protocol failed for good; ``status`` is its HTTP status (0: no reply)."""

    def __init__(self, message: str, *, status: int):
        super().__init__(message)
        self.status = status


@dataclass
class _Item:
    custom_id: str
    messages: list[Message]
    params: SamplingParams
    line: bytes
    future: asyncio.Future
    attempts: int = 0
    errors: list[str] = field(default_factory=list)


def custom_id(key: str | None, body: bytes) -> str:
    """The line's id: the request key and the exact body (a changed body is a new request)."""
    return hashlib.sha256((key or "").encode() + b"\n" + body).hexdigest()[:48]


class BatchCollector:
    """The batch side of one OpenAI-compatible backend (:class:`BatchHost`; see the module docstring)."""

    def __init__(self, backend: BatchHost, *, journal: Path | None):
        self.backend = backend
        self.spec = backend.spec.batch
        self.journal = BatchJournal(journal) if journal is not None else None
        self.stats: Counter = Counter()  # waves, batches, submitted, item_errors, expired, retried_*, failed_items
        self._loop: asyncio.AbstractEventLoop | None = None
        self._collected: list[_Item] = []
        self._items: dict[str, _Item] = {}  # custom_id -> the call waiting on it (collected or in a batch)
        self._attached: dict[str, str] = {}  # custom_id -> open batch of an earlier run
        self._tasks: set[asyncio.Task] = set()
        self._wakeup: asyncio.Event | None = None
        self._limiter: Any = None

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        self._loop, self._collected, self._items, self._attached = loop, [], {}, {}
        self._wakeup = asyncio.Event()
        self._spawn(self._collect())
        for batch_id, url, ids in self.journal.open_batches() if self.journal else []:
            self.stats["reattached"] += 1
            self._attached.update(dict.fromkeys(ids, batch_id))
            log.info("batch %s of an earlier run (%d requests) is still open: waiting for it", batch_id, len(ids))
            self._spawn(self._follow(url, batch_id, ids))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def chat(self, messages: list[Message], params: SamplingParams, key: str | None) -> ChatResult:
        """Answer one call through a batch (or a kept result of an earlier run's batch)."""
        self._bind()
        self._limiter = current()[0] or self._limiter
        mode = self.backend.spec.structured_output if params.json_schema is not None else "none"
        body = orjson.dumps(self.backend.payload(messages, params, mode))
        cid = custom_id(key, body)
        item = self._items.get(cid)
        if item is None:
            kept = self.journal.take_result(cid) if self.journal is not None else None
            if kept is not None:
                self.stats["from_journal"] += 1
                return kept
            future = asyncio.get_running_loop().create_future()
            item = self._items[cid] = _Item(cid, messages, params, input_line(cid, self.spec.endpoint, body), future)
            if cid not in self._attached:
                self._add(item)
        with parked():
            return await asyncio.shield(item.future)

    def _add(self, item: _Item) -> None:
        self._collected.append(item)
        self._wakeup.set()

    async def _collect(self) -> None:
        """Form waves: wait for a first call, then until the wave is complete or a bound is reached."""
        while True:
            while not self._collected:
                self._wakeup.clear()
                await self._wakeup.wait()
            began, quiet = time.monotonic(), 0
            while len(self._collected) < self.spec.max_requests and time.monotonic() - began < self.spec.max_wait_s:
                await asyncio.sleep(self.spec.settle_s)
                quiet = quiet + 1 if quiescent(self._limiter) else 0
                if quiet >= 2:
                    break
            wave, self._collected = self._collected, []
            self.stats["waves"] += 1
            runs = split(
                [i.line for i in wave], max_requests=self.spec.max_requests, max_bytes=self.spec.max_file_bytes
            )
            for run in runs:
                self._spawn(self._submit([wave[i] for i in run]))

    async def _submit(self, items: list[_Item]) -> None:
        urls = self.backend.spec.base_urls
        url = urls[self.stats["batches"] % len(urls)]
        self.stats["batches"] += 1
        try:
            content = b"".join(i.line for i in items)
            uploaded = await self._request("POST", f"{url}/files", form=lambda: upload_form(content))
            batch = await self._request(
                "POST",
                f"{url}/batches",
                json_body={
                    "input_file_id": uploaded["id"],
                    "endpoint": self.spec.endpoint,
                    "completion_window": self.spec.completion_window,
                    "metadata": {"source": "edumas"},
                },
            )
            ids = [i.custom_id for i in items]
            if self.journal is not None:
                self.journal.record(batch["id"], url=url, input_file_id=uploaded["id"], custom_ids=ids)
            self.stats["submitted"] += len(items)
            log.info("batch %s: %d requests (%d bytes) submitted to %s", batch["id"], len(items), len(content), url)
        except Exception as exc:
            for item in items:
                self._fail(item, f"submitting a batch to {url} failed: {exc}")
            return
        await self._follow(url, batch["id"], ids)

    async def _follow(self, url: str, batch_id: str, ids: list[str]) -> None:
        """Poll ``batch_id`` until it ends, then hand out its lines."""
        try:
            while True:
                try:
                    batch = await self._request("GET", f"{url}/batches/{batch_id}")
                except BatchRequestError as exc:
                    if exc.status and exc.status not in RETRYABLE_STATUS:
                        raise
                    log.warning("batch %s: polling failed (%s); polling on", batch_id, exc)  # it runs on regardless
                    batch = {}
                if batch.get("status") in TERMINAL:
                    break
                await asyncio.sleep(self.spec.poll_interval_s)
            status = batch["status"]
            outcomes: dict[str, ItemOutcome] = {}
            for file_id in (batch.get("output_file_id"), batch.get("error_file_id")):
                if file_id:
                    content = await self._request("GET", f"{url}/files/{file_id}/content", raw=True)
                    outcomes.update((o.custom_id, o) for o in parse_output(content, self.backend.spec.model))
        except Exception as exc:
            for cid in ids:
                if self._attached.get(cid) == batch_id:
                    del self._attached[cid]
                if (item := self._items.get(cid)) is not None:
                    self._fail(item, f"following batch {batch_id} on {url} failed: {exc}")
            return
        why = batch_errors(batch) if status == "failed" else f"the batch ended {status} without this request"
        unclaimed: dict[str, ChatResult] = {}
        for cid in ids:
            if self._attached.get(cid) == batch_id:
                del self._attached[cid]
            outcome = outcomes.get(cid) or ItemOutcome(
                cid, error=f"batch_{status}: {why}", code=f"batch_{status}", retryable=True
            )
            item = self._items.get(cid)
            if outcome.result is None and cid in self._attached:
                continue  # a later batch of an earlier run carries this line too: its outcome counts
            if outcome.result is not None:
                if item is None:
                    unclaimed[cid] = outcome.result
                else:
                    self._resolve(item, outcome.result)
                continue
            self.stats["item_errors"] += 1
            self.stats["expired"] += outcome.code == "batch_expired"
            if item is not None:
                self._retry_or_fail(item, outcome, batch_id)
        if self.journal is not None:
            self.journal.finish(batch_id, status=status, unclaimed=unclaimed)

    def _retry_or_fail(self, item: _Item, outcome: ItemOutcome, batch_id: str) -> None:
        item.errors.append(f"batch {batch_id}: {outcome.error}")
        policy = self.spec.on_item_failure
        if not outcome.retryable or policy == "fail" or item.attempts >= self.spec.max_item_retries:
            self._fail(item, "; ".join(item.errors))
            return
        item.attempts += 1
        self.stats[f"retried_{policy}"] += 1
        log.warning("batch %s: request %s failed (%s); retrying %s", batch_id, item.custom_id, outcome.error, policy)
        if policy == "batch":
            self._add(item)
        else:
            self._spawn(self._online(item))

    async def _online(self, item: _Item) -> None:
        try:
            result = await self.backend.chat_online(item.messages, item.params)
        except Exception as exc:
            self._fail(item, "; ".join([*item.errors, f"online retry: {exc}"]))
            return
        self._resolve(item, result)

    def _resolve(self, item: _Item, result: ChatResult) -> None:
        self._items.pop(item.custom_id, None)
        result.retried_errors = list(item.errors)  # kept in the agent's trace row
        if not item.future.done():
            item.future.set_result(result)

    def _fail(self, item: _Item, message: str) -> None:
        self.stats["failed_items"] += 1
        self._items.pop(item.custom_id, None)
        if not item.future.done():
            item.future.set_exception(LLMError(f"openai backend ({self.backend.spec.model}) batch mode: {message}"))

    async def _request(
        self,
        method: str,
        url: str,
        *,
        json_body: dict[str, Any] | None = None,
        form: Callable[[], aiohttp.FormData] | None = None,
        raw: bool = False,
    ) -> Any:
        """One API request with the backend's retries (429, 5xx, dropped connections)."""
        await self.backend._bind_loop()
        session = self.backend._session_for_loop()
        headers = {k: v for k, v in self.backend._headers.items() if k != "Content-Type" or json_body is not None}
        last = ""
        for attempt in range(self.backend.spec.max_retries + 1):
            data = form() if form is not None else (orjson.dumps(json_body) if json_body is not None else None)
            try:
                async with session.request(method, url, data=data, headers=headers) as response:
                    body, status = await response.read(), response.status
            except (TimeoutError, aiohttp.ClientError) as exc:
                body, status = b"", 0
                last = f"{type(exc).__name__}: {self.backend._scrub(str(exc))}"
            if status == 200:
                return body if raw else orjson.loads(body)
            if status:
                last = f"HTTP {status}: {self.backend._scrub(server_message(body))}"
                if status not in RETRYABLE_STATUS:
                    break
            if attempt < self.backend.spec.max_retries:
                await asyncio.sleep(self.backend._backoff(attempt, None))
        raise BatchRequestError(f"{method} {url}: {last}", status=status)

    async def close(self) -> None:
        if self._loop is asyncio.get_running_loop():
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._loop = None
        if self.stats:
            log.info("batch mode (%s): %s", self.backend.spec.model, dict(sorted(self.stats.items())))
        if self.journal is not None:
            self.journal.close()
            self.journal = None
