"""A stage process's CPU split by component, with exact per-thread accounting (benchmarks only).

    python -m benchmarks.scale.cpu_split --out split.json stages.generate_ram2c --params params.yaml

runs the stage module as ``__main__`` after wrapping the components' entry points, and writes what
each cost to ``--out``. Nothing under ``pipelines/`` is changed: the wrappers live in this process.

Every figure is a thread's own CPU (``time.thread_time``, CLOCK_THREAD_CPUTIME_ID, exact to the
nanosecond and blind to other processes), taken on entry to and exit from a wrapped call in the
thread that makes it; nested calls are subtracted from the caller (exclusive time). Components:

- ``embedding``: the embedders' ``encode_queries`` / ``encode_documents`` (torch, ONNX, BGE-M3);
- ``store``: every method of :class:`~pipelines.retrieval.store.KnowledgeStore` (Chroma);
- ``runtime``: the LLM client (each step of an ``LLM.chat`` coroutine: cache, limiter, backend,
  aiohttp), the request cache's writer thread, ``LLMRuntime.preflight``/``close``, and the event
  loop itself: its own work between callbacks and every callback that is not a task's step
  (transport reads, timers, future callbacks);
- ``team``: the rest: the tasks' steps outside the client (agents, templates, parsing, traces, the
  runner), the worker threads' other work, the main thread outside the event loop;
- ``baselines`` (tagging): ``pipelines.tagging.run.baseline_predictions`` (the embedding and PLM
  baselines' training and prediction), counted as the whole process's CPU over the call (torch's
  own threads included) and kept out of the per-call figure.

Threads that are not Python's (torch's or ONNX Runtime's intra-op pools, Chroma's) are read from
``/proc/self/task`` at the end and reported by name (``other_threads``); what exited before is the
process total less every thread counted (``other_threads_exited``).

Two phases: ``startup`` is everything up to the first ``LLM.chat`` (imports, models, the knowledge
base, KGC's demonstration pools, tagging's baselines); ``calls`` is the rest of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import resource
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any

COMPONENTS = ("embedding", "store", "runtime", "team", "baselines")
ABSORBING = "baselines"  # nested wrapped calls inside it are its own


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ThreadBook:
    """One thread's open regions and exclusive CPU per component."""

    __slots__ = ("default", "ident", "name", "native_id", "stack", "totals", "final")

    def __init__(self, default: str):
        thread = threading.current_thread()
        self.default = default
        self.ident = threading.get_ident()
        self.name = thread.name
        self.native_id = threading.get_native_id()
        self.stack: list[list[Any]] = []  # [component, start, children's inclusive time]
        self.totals: dict[str, float] = dict.fromkeys(COMPONENTS, 0.0)
        self.final: float | None = None  # the thread's CPU when it ended

    def cpu_now(self) -> float:
        """This thread's CPU so far, read from any thread."""
        if self.final is not None:
            return self.final
        if self.ident == threading.get_ident():
            return time.thread_time()
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(self.ident))
        except (OSError, ProcessLookupError):  # it ended between the look-up and the read
            return sum(self.totals.values())

    def split(self) -> dict[str, float]:
        """Exclusive CPU per component, the thread's unwrapped time given to its default component."""
        out = dict(self.totals)
        out[self.default] += max(0.0, self.cpu_now() - sum(self.totals.values()))
        return out


class Ledger:
    def __init__(self) -> None:
        self.books: dict[int, ThreadBook] = {}
        self.ended: list[ThreadBook] = []
        self.lock = threading.Lock()
        self.main = self.book(default="team")
        self.baseline_extra = 0.0  # other threads' CPU during the baselines (torch's pool)
        self.startup: dict[str, Any] | None = None
        self.chats = 0

    def book(self, default: str | None = None) -> ThreadBook:
        ident = threading.get_ident()
        book = self.books.get(ident)
        if book is None:
            name = threading.current_thread().name
            book = ThreadBook(default or ("runtime" if name == "edumas-cache-writer" else "team"))
            with self.lock:
                self.books[ident] = book
        return book

    def enter(self, component: str) -> None:
        book = self.book()
        if book.stack and book.stack[-1][0] == ABSORBING:
            book.stack.append(None)
            return
        book.stack.append([component, time.thread_time(), 0.0])

    def leave(self) -> None:
        book = self.books[threading.get_ident()]
        top = book.stack.pop()
        if top is None:
            return
        component, start, children = top
        inclusive = time.thread_time() - start
        book.totals[component] += inclusive - children
        if book.stack and book.stack[-1] is not None:
            book.stack[-1][2] += inclusive

    def flush(self) -> None:
        """Credit this thread's open regions with their time so far and restart them (a phase ends)."""
        book = self.book()
        now, inner = time.thread_time(), 0.0
        for region in reversed(book.stack):
            if region is None:
                continue
            component, start, children = region
            inclusive = now - start
            book.totals[component] += inclusive - children - inner
            region[1], region[2], inner = now, 0.0, inclusive

    def thread_ended(self) -> None:
        book = self.books.get(threading.get_ident())
        if book is not None:
            book.final = time.thread_time()
            with self.lock:
                self.ended.append(self.books.pop(book.ident))

    def snapshot(self) -> dict[str, Any]:
        """Process CPU and the components so far (every Python thread, live or ended)."""
        with self.lock:
            books = list(self.books.values()) + list(self.ended)
        components = dict.fromkeys(COMPONENTS, 0.0)
        threads = []
        for book in books:
            split = book.split()
            for key, value in split.items():
                components[key] += value
            threads.append({"name": book.name, "native_id": book.native_id, "cpu_s": round(sum(split.values()), 4)})
        components["baselines"] += self.baseline_extra
        return {"process_cpu_s": process_cpu(), "components": components, "python_threads": threads}


LEDGER: Ledger | None = None


def timed(fn, component: str):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        LEDGER.enter(component)
        try:
            return fn(*args, **kwargs)
        finally:
            LEDGER.leave()

    return wrapper


class TimedSteps:
    """Awaits a coroutine, timing each of its steps as ``component`` (what runs inside a step is the
    coroutine's own code and what it calls, never another task)."""

    __slots__ = ("coro", "component")

    def __init__(self, coro, component: str):
        self.coro, self.component = coro, component

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        return self.send(None)

    def send(self, value):
        LEDGER.enter(self.component)
        try:
            return self.coro.send(value)
        finally:
            LEDGER.leave()

    def throw(self, *exc):
        LEDGER.enter(self.component)
        try:
            return self.coro.throw(*exc)
        finally:
            LEDGER.leave()

    def close(self):
        return self.coro.close()


def timed_async(fn, component: str, *, on_call=None):
    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        if on_call is not None:
            on_call()
        return await TimedSteps(fn(*args, **kwargs), component)

    return wrapper


def whole_process(fn):
    """The baselines: their thread's exclusive time, plus every other thread's CPU meanwhile."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        cpu, own = process_cpu(), time.thread_time()
        LEDGER.enter(ABSORBING)
        try:
            return fn(*args, **kwargs)
        finally:
            LEDGER.leave()
            LEDGER.baseline_extra += max(0.0, (process_cpu() - cpu) - (time.thread_time() - own))

    return wrapper


def first_chat() -> None:
    LEDGER.chats += 1
    if LEDGER.startup is None:
        LEDGER.flush()
        LEDGER.startup = LEDGER.snapshot()


def instrument(*, tagging: bool) -> None:
    """Wrap the components' entry points (module docstring); ``tagging``: the baselines too (only
    then is the tagging team imported, so other stages' start-up is theirs)."""
    from pipelines.llm.client import LLM, LLMRuntime
    from pipelines.retrieval.embedders import BGEM3Embedder, SentenceTransformerEmbedder
    from pipelines.retrieval.onnx_embedder import OnnxSentenceEmbedder
    from pipelines.retrieval.store import KnowledgeStore

    for cls in (SentenceTransformerEmbedder, BGEM3Embedder, OnnxSentenceEmbedder):
        for name in ("encode_queries", "encode_documents"):
            setattr(cls, name, timed(getattr(cls, name), "embedding"))
    for name, member in list(vars(KnowledgeStore).items()):
        if callable(member) and not name.startswith("__") and not isinstance(member, (classmethod, staticmethod)):
            setattr(KnowledgeStore, name, timed(member, "store"))
    LLM.chat = timed_async(LLM.chat, "runtime", on_call=first_chat)
    LLMRuntime.preflight = timed_async(LLMRuntime.preflight, "runtime")
    LLMRuntime.close = timed_async(LLMRuntime.close, "runtime")
    if tagging:
        import pipelines.tagging.run as tagging_run

        tagging_run.baseline_predictions = whole_process(tagging_run.baseline_predictions)

    handle_run = asyncio.events.Handle._run

    def run_handle(self):
        task = getattr(self._callback, "__self__", None)
        LEDGER.enter("team" if isinstance(task, asyncio.Task) else "runtime")
        try:
            return handle_run(self)
        finally:
            LEDGER.leave()

    asyncio.events.Handle._run = run_handle
    asyncio.base_events.BaseEventLoop.run_forever = timed(asyncio.base_events.BaseEventLoop.run_forever, "runtime")

    bootstrap = threading.Thread._bootstrap_inner

    def bootstrap_inner(self):
        try:
            return bootstrap(self)
        finally:
            LEDGER.thread_ended()

    threading.Thread._bootstrap_inner = bootstrap_inner


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def native_threads(known: set[int]) -> dict[str, float]:
    """CPU of the live threads Python does not know, by name (``/proc/self/task``)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        if int(task.name) in known:
            continue
        try:
            stat = (task / "stat").read_text()
            comm = (task / "comm").read_text().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[comm] = out.get(comm, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def finish(out: Path, started: float) -> None:
    end = LEDGER.snapshot()
    known = {t["native_id"] for t in end["python_threads"]}
    others = native_threads(known)
    counted = sum(end["components"].values()) - LEDGER.baseline_extra + sum(others.values())
    start = LEDGER.startup or end
    result = {
        "chats": LEDGER.chats,
        "process_cpu_s": end["process_cpu_s"] - started,
        "startup": {
            "cpu_s": start["process_cpu_s"] - started,
            "components": start["components"],
        },
        "calls": {
            "cpu_s": end["process_cpu_s"] - start["process_cpu_s"],
            "components": {k: end["components"][k] - start["components"][k] for k in COMPONENTS},
        },
        "children_cpu_s": children_cpu(),  # processes it ran and reaped (tagging's sandboxed programs)
        "other_threads": others,
        "other_threads_exited": max(0.0, end["process_cpu_s"] - started - counted),
        "python_threads": end["python_threads"],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))


def main() -> int:
    global LEDGER
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where the split goes (JSON)")
    parser.add_argument("module", help="the stage module, e.g. stages.generate_ram2c")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    started = 0.0  # the process's CPU counts from its start: imports are start-up
    LEDGER = Ledger()
    instrument(tagging=args.module.endswith("generate_tagging"))
    sys.argv = [args.module, *args.args]
    code = 0
    try:
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        finish(Path(args.out), started)
    return code


if __name__ == "__main__":
    sys.exit(main())
