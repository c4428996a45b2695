"""The provider batch API on a simulated server (OpenAI's files + batches protocol), tests only.

Endpoints added to a :class:`SimServer`: ``POST /v1/files`` (multipart ``purpose`` + ``file``),
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches/{id}``. A batch is
validated when created (every line JSON with a unique ``custom_id``, ``method`` POST, ``url`` the
batch's endpoint; otherwise it ends ``failed`` with the reasons in ``errors``), runs for
``delay_s`` real seconds, then answers every line through the server's :class:`Completer` (the
same reply an online request with that body gets: replies depend on the body only). Faults, in
the first ``faulty_batches`` batches only (so a retry batch goes through): a share
``expire_rate`` of the lines is left undone (the batch ends ``expired``, those lines in the error
file with code ``batch_expired``), a share ``error_rate`` answers HTTP 500 in the error file.
Every line of every created batch is written to the server's request log (``kind: batch_item``,
its batch, ``custom_id`` and body hash), so a test can count what was submitted.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from tests.support.simserver.server import SimServer, _error


@dataclass(frozen=True)
class BatchFaults:
    """How batches behave: real seconds until done, and the faults of the first ``faulty_batches``."""

    delay_s: float = 0.2
    expire_rate: float = 0.0
    error_rate: float = 0.0
    faulty_batches: int = 1
    seed: int = 0


class BatchAPI:
    """The batch endpoints of one server (see the module docstring)."""

    def __init__(self, server: SimServer, faults: BatchFaults | None = None):
        self.server = server
        self.faults = faults or BatchFaults()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task] = set()
        for key in ("batches", "batch_items", "batch_expired", "batch_errors", "files"):
            server.counts[key] = 0
        server.add_routes(
            [
                ("POST", "/v1/files", self._upload),
                ("GET", "/v1/files/{file_id}/content", self._content),
                ("POST", "/v1/batches", self._create),
                ("GET", "/v1/batches/{batch_id}", self._retrieve),
            ]
        )

    def _file(self, content: bytes, purpose: str, name: str) -> dict[str, Any]:
        file_id = f"file-sim-{next(self._ids)}"
        self.files[file_id] = content
        self.server.counts["files"] += 1
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
        }

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if form.get("purpose") != "batch" or not hasattr(upload, "file"):
            return _error(400, "a batch input needs purpose=batch and a file")
        return web.json_response(self._file(upload.file.read(), "batch", upload.filename or "input.jsonl"))

    async def _content(self, request: web.Request) -> web.Response:
        content = self.files.get(request.match_info["file_id"])
        if content is None:
            return _error(404, "no such file")
        return web.Response(body=content, content_type="application/octet-stream")

    async def _retrieve(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        return web.json_response(batch) if batch is not None else _error(404, "no such batch")

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        content = self.files.get(body.get("input_file_id", ""))
        if content is None:
            return _error(400, f"no input file {body.get('input_file_id')!r}")
        index = self.server.counts["batches"]
        self.server.counts["batches"] += 1
        batch_id = f"batch-sim-{index}"
        endpoint = body.get("endpoint", "")
        lines, errors = _validate(content, endpoint)
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": endpoint,
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window", "24h"),
            "status": "validating",
            "created_at": int(time.time()),
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "metadata": body.get("metadata"),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        self.batches[batch_id] = batch
        if errors:
            batch.update(status="failed", errors={"object": "list", "data": errors})
            return web.json_response(batch)
        for line in lines:
            self.server.counts["batch_items"] += 1
            self.server._write_log(
                kind="batch_item",
                batch=batch_id,
                custom_id=line["custom_id"],
                hash=_hash(line["body"]),
                t=round(time.monotonic(), 4),
            )
        batch["status"] = "in_progress"
        task = asyncio.get_running_loop().create_task(self._run(batch, lines, index < self.faults.faulty_batches))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response(batch)

    async def _run(self, batch: dict[str, Any], lines: list[dict[str, Any]], faulty: bool) -> None:
        await asyncio.sleep(self.faults.delay_s)
        rng = random.Random(f"{self.faults.seed}/{batch['id']}")
        outputs, errors = [], []
        for n, line in enumerate(lines):
            draw = rng.random() if faulty else 1.0
            cid, body = line["custom_id"], line["body"]
            if draw < self.faults.expire_rate:
                self.server.counts["batch_expired"] += 1
                errors.append(
                    {
                        "id": f"req-{n}",
                        "custom_id": cid,
                        "response": None,
                        "error": {"code": "batch_expired", "message": "not run before the window ended"},
                    }
                )
                continue
            if draw < self.faults.expire_rate + self.faults.error_rate:
                self.server.counts["batch_errors"] += 1
                error = {"error": {"message": "server error (simulated)", "type": "server_error"}}
                errors.append(
                    {
                        "id": f"req-{n}",
                        "custom_id": cid,
                        "error": None,
                        "response": {"status_code": 500, "request_id": f"r{n}", "body": error},
                    }
                )
                continue
            prepared = self.server.completer.prepare(body, orjson.dumps(body))
            reply = self.server.completer.completion_body(body, prepared, n, int(time.time()))
            outputs.append(
                {
                    "id": f"req-{n}",
                    "custom_id": cid,
                    "error": None,
                    "response": {"status_code": 200, "request_id": f"r{n}", "body": reply},
                }
            )
        counts = {"total": len(lines), "completed": len(outputs), "failed": len(errors)}
        if outputs:
            batch["output_file_id"] = self._file(_jsonl(outputs), "batch_output", "output.jsonl")["id"]
        if errors:
            batch["error_file_id"] = self._file(_jsonl(errors), "batch_output", "errors.jsonl")["id"]
        expired = any(e["error"] and e["error"]["code"] == "batch_expired" for e in errors)
        batch.update(status="expired" if expired else "completed", request_counts=counts)


def _validate(content: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    lines, errors, seen = [], [], set()
    for number, raw in enumerate(content.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            errors.append({"code": "invalid_json_line", "line": number, "message": f"line {number} is not JSON"})
            continue
        cid = line.get("custom_id")
        if not isinstance(cid, str) or cid in seen:
            errors.append({"code": "duplicate_custom_id", "line": number, "message": f"line {number}: custom_id"})
        elif line.get("method") != "POST" or line.get("url") != endpoint or not isinstance(line.get("body"), dict):
            errors.append({"code": "invalid_request", "line": number, "message": f"line {number}: method/url/body"})
        seen.add(cid)
        lines.append(line)
    return lines, errors


def _hash(body: dict[str, Any]) -> str:
    from tests.support.simserver.completion import body_hash

    return body_hash(orjson.dumps(body))


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)
