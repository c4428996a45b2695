"""Atomic file writing: a killed stage never leaves a half-written output behind.

Every writer goes to a temporary file in the same folder (``.<name>.<pid>.<random>.tmp``) and
``os.replace``-s it into place. The file gets the mode a plain ``open(path, "w")`` would give it
(``0o666`` less the umask; ``mkstemp`` alone makes it ``0600``, unreadable by a trainer running as
another user). A temporary left by a writer that was SIGKILLed (its pid is no live process here, and
it was last written before this process started) is removed when the file is written again and, for
a stage's outputs, when the stage starts (:func:`remove_stale_temporaries_under`).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, TextIO

from pipelines.errors import InputError, read_input_text

_STARTED = time.time()  # temporaries older than this are no writer's of this process
_OPEN: set[str] = set()  # this process's temporaries not yet renamed or removed (a stop's watchdog removes them)
_PID_TMP = re.compile(r"^\..+\.(\d+)\.[a-z0-9_]+\.tmp$")  # .<name>.<pid>.<random>.tmp


def _writer_is_dead(name: str) -> bool:
    """True unless the temporary's name carries a pid that is this process or a live one (a name
    without a pid, of an older writer, counts as dead: its age alone decides)."""
    match = _PID_TMP.match(name)
    return match is None or _pid_is_dead(int(match.group(1)))


def _pid_is_dead(pid: int) -> bool:
    """True when ``pid`` is neither this process nor a live one."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _is_stale(tmp: Path) -> bool:
    return tmp.is_file() and _writer_is_dead(tmp.name) and _before_this_process(tmp)


def _before_this_process(path: Path) -> bool:
    """Last changed before this process started (so no writer of this process, whatever the pid)."""
    return path.stat().st_mtime < _STARTED


def _umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    current = os.umask(0o022)  # no /proc: read it by setting it (and back at once)
    os.umask(current)
    return current


def plain_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the process umask."""
    return 0o666 & ~_umask()


def apply_umask_modes(folder: Path | str) -> None:
    """Give ``folder``, its sub-folders and files the modes ordinary ``mkdir``/``open`` would (``0o777``/``0o666``
    less the umask; files with an execute bit keep it): ``tempfile.mkdtemp`` (0700) and safetensors'
    ``save_file`` (0600) leave outputs another user cannot read. Symbolic links are left alone."""
    mask = _umask()
    folder = Path(folder)
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        executable = path.is_dir() or path.stat().st_mode & 0o111
        os.chmod(path, (0o777 if executable else 0o666) & ~mask)


def remove_stale_temporaries(path: Path | str) -> list[Path]:
    """Remove the temporary siblings of ``path`` (``.<name>.*.tmp``) that a killed writer left: those
    last written before this process started by a pid that is no live process (a writer of this
    process, or of a live one, is never touched)."""
    path = Path(path)
    return _remove_stale(path.parent.glob(f".{path.name}.*.tmp"))


def remove_stale_temporaries_under(path: Path | str) -> list[Path]:
    """:func:`remove_stale_temporaries` of a file, or of every file under a folder (there only the
    temporaries whose name carries a pid: no other tool's hidden ``.tmp`` file is touched)."""
    path = Path(path)
    if path.is_dir():
        return _remove_stale(t for t in path.rglob(".*.tmp") if _PID_TMP.match(t.name))
    return remove_stale_temporaries(path)


def _remove_stale(candidates: Iterable[Path]) -> list[Path]:
    removed = []
    for tmp in candidates:
        try:
            if _is_stale(tmp):
                tmp.unlink()
                removed.append(tmp)
        except FileNotFoundError:
            pass
    return removed


def remove_stale_partial_folders(dest: Path | str) -> list[Path]:
    """Remove the ``<dest>.partial-<pid>`` folders beside ``dest`` that a killed builder left (a folder
    is built under that name, then renamed onto ``dest``): those whose pid is no live process and that
    were last changed before this process started; a live builder's folder is never touched."""
    dest = Path(dest)
    removed = []
    for folder in dest.parent.glob(f"{glob.escape(dest.name)}.partial-*"):
        pid = folder.name[len(dest.name) + len(".partial-") :]
        try:
            if pid.isdigit() and _pid_is_dead(int(pid)) and folder.is_dir() and _before_this_process(folder):
                shutil.rmtree(folder)
                removed.append(folder)
        except FileNotFoundError:
            pass
    return removed


def remove_open_temporaries() -> None:
    """Remove this process's unfinished temporaries (a stop that cannot wait for them to unwind)."""
    for tmp in list(_OPEN):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def temporary_sibling(path: Path | str) -> tuple[int, str]:
    """``(fd, name)`` of a new temporary file beside ``path``, with the mode of a plain write; the
    stale temporaries of ``path`` are removed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, plain_file_mode())
    _OPEN.add(tmp)
    return fd, tmp


def forget_temporary(tmp: str) -> None:
    """``tmp`` was renamed into place or removed: a stop has nothing to remove for it."""
    _OPEN.discard(tmp)


@contextmanager
def atomic_open(path: Path | str, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[TextIO]:
    """Open a temporary sibling of ``path`` for writing; on success rename it onto ``path``."""
    path = Path(path)
    fd, tmp = temporary_sibling(path)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    finally:
        forget_temporary(tmp)


def write_json_atomic(path: Path | str, data: Any) -> None:
    """Write ``data`` as indented UTF-8 JSON, atomically."""
    with atomic_open(path) as handle:
        json.dump(data, handle, ensure_ascii=False, indent=2, sort_keys=False)
        handle.write("\n")


def write_jsonl_atomic(path: Path | str, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows as JSON lines, atomically; returns the number of rows."""
    count = 0
    with atomic_open(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def iter_jsonl_objects(
    lines: Iterable[str], path: Path | str, *, error: type[Exception] = ValueError
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSON-lines text; a line that is not
    valid JSON or not a JSON object raises ``error`` naming ``path``, the line and the fix."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            where = f"{path}:{number}"
            raise error(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); fix or remove the line") from None
        if not isinstance(row, dict):
            raise error(f"{path}:{number}: expected a JSON object per line, got {type(row).__name__}")
        yield number, row


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    """Read JSON lines (one object each); a bad line, a folder or a file that is not UTF-8 raises
    :class:`InputError` (a ValueError) naming the file and line number."""
    text = read_input_text(path, fix="point params.yaml at a JSON-lines file")
    return [row for _, row in iter_jsonl_objects(text.split("\n"), path, error=InputError)]  # U+2028 is text


def user_cache_dir(name: str) -> Path:
    """``$XDG_CACHE_HOME/edumas/<name>`` when the variable is set, else ``~/.cache/edumas/<name>``:
    files derived from inputs by content (vectors, exported models) that every run of this user shares."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path("~/.cache").expanduser()) / "edumas" / name
