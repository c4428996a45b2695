"""Run untrusted, LLM-written Python in a separate, limited process and read a True/False verdict.

Input: the program's source and :class:`SandboxLimits`. Output: a :class:`SandboxResult` with the
captured stdout/stderr, the exit code, why it was stopped (if it was) and the parsed verdict.

What each run gets (layers, outermost first):

* its own process, started as ``python -I -S -X utf8`` (isolated: no site-packages, no user site,
  no ``PYTHON*`` variables) with an **empty environment** (no API key can reach it), stdin closed
  after the source is sent, no inherited file descriptors, a **fresh temporary folder**
  (``edumas-sandbox-<stage pid>-*``) as cwd that is deleted afterwards, or by the next sandbox start
  in any process once the stage that made it is dead;
* when the stage runs as root, uid/gid 65534 where that user can start the interpreter and cannot
  write its or the project's files (:mod:`pipelines.agents.sandbox_isolation` checks once, and logs
  why not);
* a new session / process group, killed as a whole (SIGKILL) when the wall-clock limit passes or
  the output grows beyond ``max_output_bytes`` (reading stops there);
* when the kernel lets an unprivileged user create namespaces (checked once with
  ``unshare --user --net --pid true``) the process runs in a **new, empty network namespace** (no
  interfaces but a down loopback: no network at all) and a **new PID namespace**: the runner forks
  and the program is PID 1 there, its parent outside is PID 0 to it, no other process has a number
  it could signal. The runner kills the program when the stage dies. Without namespaces, network
  access is refused only in-process by the audit hook and the import allow-list (best effort, see
  below);
* kernel limits set in the child before the program runs: RLIMIT_CPU (SIGKILL at the limit),
  RLIMIT_AS (memory), RLIMIT_FSIZE (largest file = ``max_output_bytes``), RLIMIT_NOFILE 32,
  RLIMIT_NPROC 0 (ignored for root outside a user namespace), RLIMIT_CORE 0;
* in-process (see :mod:`pipelines.agents.sandbox_runner`): builtins without ``open``/``exec``/
  ``eval``/``compile``/``input``/``breakpoint``, an ``__import__`` that allows only
  ``allowed_imports`` (plus the pure-computation stdlib modules they need), thread creation and the
  unaudited ``mkfifo``/``mknod`` and process controls (``kill``, pidfds, ids, sessions,
  namespaces, signals) removed, ``_imp`` kept from rebuilding a module to get them back, and an
  audit hook (irremovable, default-deny) that ends the process on ``os.system``, ``subprocess``,
  ``os.fork``/``exec``/``posix_spawn``, sockets, ctypes, gc/trace introspection, code-object
  creation, unmarshalling anything but the standard library's own bytecode, any relative path
  (with ``dir_fd`` it may resolve anywhere), reads outside the temporary folder and the standard
  library, and writes outside the temporary folder (at most 64 file opens for writing inside it).

Guarantee: no network when the namespace is available (else: no socket can be created from
Python); no file content outside the temporary folder and the standard library can be read; no
file outside the temporary folder can be written; no process can be started or signalled; the
environment is empty. The in-process layers assume CPython has no memory-corruption bug reachable from pure
Python; against a deliberate exploit of one, only the process, kernel limits, empty environment
and network namespace remain. ``os.stat``/``os.readlink`` are not audited by CPython, so the
existence and size of outside files can leak. Run the project in a container for hostile workloads.

The verdict is ``True``/``False`` only when the program exited with code 0, was not stopped and
the last non-empty stdout line is exactly ``True`` or ``False``; anything else gives ``None``.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, field_validator

from pipelines.agents import sandbox_runner
from pipelines.agents.sandbox_isolation import FOLDER_PREFIX, Isolation, clean_leftovers, probe
from pipelines.config import StrictModel

RUNNER = Path(sandbox_runner.__file__).resolve()
# Import the runner as a module (its cached bytecode saves ~6 ms a run over running it as a script),
# then take its folder off sys.path again.
BOOT = (
    f"import sys; sys.path.insert(0, {str(RUNNER.parent)!r}); "
    f"import {RUNNER.stem}; del sys.path[0]; {RUNNER.stem}.main()"
)
DEFAULT_ALLOWED_IMPORTS = [
    "math", "fractions", "decimal", "itertools", "functools", "statistics", "re", "collections", "string",
    "operator", "numbers", "cmath", "random", "datetime",
]  # fmt: skip
# Modules that hand out the process, the file system, the network or the interpreter itself.
# fmt: off
NEVER_ALLOWED = frozenset((
    "os", "sys", "posix", "subprocess", "socket", "ssl", "ctypes", "_ctypes", "importlib", "builtins", "io", "_io",
    "gc", "marshal", "pickle", "shutil", "signal", "multiprocessing", "threading", "_thread", "resource", "pty",
    "fcntl", "mmap", "inspect", "code", "codeop", "pathlib", "tempfile", "select", "selectors", "asyncio", "urllib",
    "http", "ftplib", "smtplib", "telnetlib", "sqlite3", "zipimport", "runpy", "pdb",
))
# fmt: on
KILLED_BY_EXIT_CODE = {
    sandbox_runner.EXIT_FORBIDDEN_IMPORT: "forbidden_import",
    sandbox_runner.EXIT_FORBIDDEN_OPERATION: "forbidden_operation",
    sandbox_runner.EXIT_MEMORY: "memory",
}
READ_CHUNK = 65536
# Runs in flight per event loop; more would only share the CPUs and turn slow-but-fine programs into
# wall-time kills. Waiting for a slot does not count against ``wall_time_s``.
MAX_PARALLEL_RUNS = 2 * (os.cpu_count() or 2)
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


class SandboxLimits(StrictModel):
    """Limits for one sandboxed run."""

    wall_time_s: float = Field(5.0, gt=0, description="wall-clock limit; the process group is killed after it")
    cpu_time_s: float = Field(2.0, gt=0, description="CPU-seconds limit (RLIMIT_CPU, rounded up to whole seconds)")
    memory_mb: int = Field(256, ge=64, description="address-space limit in MiB (RLIMIT_AS)")
    max_output_bytes: int = Field(65536, ge=16, description="stdout+stderr cap; also the largest file it may write")
    allowed_imports: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ALLOWED_IMPORTS),
        description="modules a program may import (plus the pure-computation stdlib modules they need)",
    )

    @field_validator("allowed_imports")
    @classmethod
    def _safe_modules(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name.isidentifier():
                raise ValueError(f"{name!r} is not a top-level module name; list names like 'math'")
            if name in NEVER_ALLOWED:
                raise ValueError(f"{name!r} gives access to the process, files or network; remove it from the list")
        return names


@dataclass
class SandboxResult:
    """Outcome of one run. ``killed_reason``: wall_time | cpu_time | memory | output_limit |
    forbidden_import | forbidden_operation | None."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    killed_reason: str | None
    verdict: bool | None
    duration_s: float

    @property
    def ok(self) -> bool:
        """The program ran to completion with exit code 0 and was not stopped."""
        return self.exit_code == 0 and self.killed_reason is None and not self.timed_out


def parse_verdict(stdout: str) -> bool | None:
    """``True``/``False`` when the last non-empty line is exactly that word (any case); else ``None``."""
    for line in reversed(stdout.splitlines()):
        word = line.strip()
        if word:
            return {"true": True, "false": False}.get(word.lower())
    return None


_isolation: Isolation | None = None
_isolation_lock = threading.Lock()


def isolation() -> Isolation:
    """The kernel layers used here (namespaces, unprivileged user), probed once per process; the
    first call also deletes sandbox folders left by dead owners."""
    global _isolation
    with _isolation_lock:
        if _isolation is None:
            clean_leftovers()
            _isolation = probe(RUNNER)
    return _isolation


def network_namespace_available() -> bool:
    """Whether the program runs in its own network namespace here."""
    return "--net" in isolation().namespace_flags


def _command(limits: SandboxLimits) -> list[str]:
    return isolation().prefix() + [
        sys.executable, "-I", "-S", "-X", "utf8", "-c", BOOT,
        str(max(1, math.ceil(limits.cpu_time_s))), str(limits.memory_mb * 1024 * 1024),
        str(limits.max_output_bytes), ",".join(limits.allowed_imports), str(os.getpid()),
    ]  # fmt: skip


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _read_capped(stream: asyncio.StreamReader, sink: bytearray, budget: list[int], on_overflow) -> None:
    """Append chunks to ``sink`` while the shared ``budget`` lasts; call ``on_overflow`` past it."""
    while chunk := await stream.read(READ_CHUNK):
        if len(chunk) > budget[0]:
            sink += chunk[: budget[0]]
            budget[0] = 0
            on_overflow()
            return
        sink += chunk
        budget[0] -= len(chunk)


async def run_python(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``code`` in a fresh sandboxed interpreter without blocking the event loop.

    At most ``MAX_PARALLEL_RUNS`` programs run at once per event loop; others wait for a slot.
    """
    limits = limits or SandboxLimits()
    if _isolation is None:
        await asyncio.to_thread(isolation)
    loop = asyncio.get_running_loop()
    if loop not in _slots:
        _slots[loop] = asyncio.Semaphore(MAX_PARALLEL_RUNS)
    async with _slots[loop]:
        return await _run_once(code, limits)


async def _run_once(code: str, limits: SandboxLimits) -> SandboxResult:
    """One sandboxed run: start the child, feed the source, read capped output, enforce the wall limit."""
    start = time.perf_counter()
    folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")
    if _isolation.user is not None:
        os.chown(folder, _isolation.user, _isolation.user)
    killed: list[str] = []
    out, err, budget = bytearray(), bytearray(), [limits.max_output_bytes]
    process = None
    try:
        process = await asyncio.create_subprocess_exec(
            *_command(limits), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=folder, env={}, start_new_session=True, **_isolation.process_options(),
        )  # fmt: skip

        def overflow() -> None:
            if not killed:
                killed.append("output_limit")
            _kill_group(process)

        async def feed() -> None:
            try:
                process.stdin.write(code.encode("utf-8", "replace"))
                await process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                process.stdin.close()

        async def supervise() -> None:
            await asyncio.gather(
                feed(), _read_capped(process.stdout, out, budget, overflow),
                _read_capped(process.stderr, err, budget, overflow),
            )  # fmt: skip
            await process.wait()

        try:
            await asyncio.wait_for(supervise(), timeout=limits.wall_time_s)
        except TimeoutError:
            if not killed:
                killed.append("wall_time")
        _kill_group(process)
        exit_code = await process.wait()
    finally:
        if process is not None and process.returncode is None:
            _kill_group(process)
            await process.wait()
        await asyncio.to_thread(shutil.rmtree, folder, True)
    reason = killed[0] if killed else _reason_from_exit(exit_code)
    stdout = out.decode("utf-8", "replace")
    clean = exit_code == 0 and reason is None
    return SandboxResult(
        stdout=stdout,
        stderr=err.decode("utf-8", "replace"),
        exit_code=exit_code,
        timed_out=reason in ("wall_time", "cpu_time"),
        killed_reason=reason,
        verdict=parse_verdict(stdout) if clean else None,
        duration_s=time.perf_counter() - start,
    )


def _reason_from_exit(exit_code: int) -> str | None:
    """Map the child's exit status to a stop reason (CPU limit signals, runner exit codes)."""
    if exit_code in (-signal.SIGXCPU, -signal.SIGKILL):
        return "cpu_time"  # SIGKILL we did not send comes from the hard CPU limit
    return KILLED_BY_EXIT_CODE.get(exit_code)


def run_python_sync(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Blocking :func:`run_python`; safe to call from inside a running event loop (uses a thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_python(code, limits))
    box: list = []
    worker = threading.Thread(target=lambda: box.append(_capture(code, limits)))
    worker.start()
    worker.join()
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _capture(code: str, limits: SandboxLimits | None) -> SandboxResult | BaseException:
    try:
        return asyncio.run(run_python(code, limits))
    except BaseException as exc:  # re-raised in the calling thread
        return exc
