"""The kernel layers the code sandbox can add on this machine, found once per process, and the
clean-up of sandbox folders whose owner died.

Layers (each used where the machine allows it; where not, :attr:`Isolation.notes` says why and the
first sandbox run logs it once):

* **namespaces**: ``unshare --user --net --pid``: no network, and a PID namespace in which the
  program is PID 1 and no outside process has a number it could name (no signal, no pidfd);
* **unprivileged user**: when the stage runs as root, the program runs as uid/gid 65534 (nobody)
  if that user can start the interpreter and cannot write the interpreter's or the project's
  files; inside a user namespace root keeps owning (and so can write) root's files.

Sandbox folders are named ``edumas-sandbox-<owner pid>-*``; :func:`clean_leftovers` removes those
whose owner is gone (a stage killed by SIGKILL cannot delete its own).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FOLDER_PREFIX = "edumas-sandbox-"
UNPRIVILEGED_ID = 65534  # nobody/nogroup
NAMESPACE_FLAGS = ("--user", "--net", "--pid")
# Run as the candidate user: exit 3 naming what it could write, 4 when it cannot read the runner.
WRITABLE_CHECK = (
    "import os, sys\n"
    "if not os.access(sys.argv[1], os.R_OK): sys.exit(4)\n"
    "w = [p for p in sys.argv[2:] if os.path.exists(p) and os.access(p, os.W_OK)]\n"
    "print('\\n'.join(w)); sys.exit(3 if w else 0)\n"
)
_UNSHARE = shutil.which("unshare")


@dataclass(frozen=True)
class Isolation:
    """``namespace_flags``: the ``unshare`` flags that work here (empty: none); ``user``: the uid and
    gid the program runs as (None: the stage's own); ``notes``: why a layer is missing."""

    namespace_flags: tuple[str, ...]
    user: int | None
    notes: tuple[str, ...]

    def prefix(self) -> list[str]:
        """Command-line prefix that starts the program in the namespaces."""
        return [_UNSHARE, *self.namespace_flags, "--"] if self.namespace_flags else []

    def process_options(self) -> dict:
        """Extra ``subprocess``/``asyncio.create_subprocess_exec`` arguments (the user switch)."""
        if self.user is None:
            return {}
        return {"user": self.user, "group": self.user, "extra_groups": []}


def protected_paths(runner: Path) -> list[str]:
    """The interpreter's and the project's folders and key files the program must not be able to write."""
    paths = {
        sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.__file__), os.__file__,
        os.path.realpath(sys.executable), os.path.dirname(os.path.realpath(sys.executable)),
        str(runner), str(runner.parent), str(runner.parents[2]),
    }  # fmt: skip
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        paths.add(sysconfig.get_path(key))
    return sorted(path for path in paths if path)


def _choose_user(runner: Path) -> tuple[int | None, str | None]:
    if os.geteuid() != 0:
        return None, None
    who = f"uid {UNPRIVILEGED_ID}"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", WRITABLE_CHECK, str(runner), *protected_paths(runner)],
            capture_output=True, text=True, timeout=30, cwd="/", env={},
            user=UNPRIVILEGED_ID, group=UNPRIVILEGED_ID, extra_groups=[],
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{who} cannot start {sys.executable} ({exc}); the program runs as root"
    if done.returncode == 0:
        return UNPRIVILEGED_ID, None
    if done.returncode == 3:
        written = ", ".join(done.stdout.split())
        return None, f"{who} could write {written}; the program runs as root"
    why = f"cannot read {runner}" if done.returncode == 4 else f"exit {done.returncode}: {done.stderr.strip()[-200:]}"
    return None, f"{who} cannot run the sandbox ({why}); the program runs as root"


def _namespaces_work(flags: Sequence[str], options: dict) -> bool:
    try:
        done = subprocess.run([_UNSHARE, *flags, "true"], capture_output=True, timeout=5, cwd="/", **options)
    except (OSError, TypeError, subprocess.SubprocessError):  # TypeError: no unshare on PATH
        return False
    return done.returncode == 0


def probe(runner: Path) -> Isolation:
    """Find which layers work here (a few short subprocesses); log what is missing."""
    notes: list[str] = []
    user, note = _choose_user(runner)
    if note:
        notes.append(note + " (the audit hook alone keeps it from the interpreter's files)")
    options = Isolation((), user, ()).process_options()
    flags: tuple[str, ...] = ()
    if _namespaces_work(NAMESPACE_FLAGS, options):
        flags = NAMESPACE_FLAGS
    elif _namespaces_work(("--user", "--net"), options):
        flags = ("--user", "--net")
        notes.append("unshare --pid is not permitted: the program shares the PID namespace of the stage")
    else:
        notes.append("unshare --user --net is not permitted (or missing): no network or PID namespace")
    isolation = Isolation(flags, user, tuple(notes))
    for line in notes:
        log.warning("sandbox: %s", line)
    return isolation


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_leftovers(folder: str | None = None) -> list[str]:
    """Delete ``edumas-sandbox-<pid>-*`` folders in ``folder`` (the temp folder) whose owner process is
    gone; returns their paths. Folders of live owners and of other names are left alone."""
    removed = []
    base = Path(folder or tempfile.gettempdir())
    for path in base.glob(FOLDER_PREFIX + "*-*"):
        owner = path.name[len(FOLDER_PREFIX) :].partition("-")[0]
        if owner.isdigit() and path.is_dir() and not path.is_symlink() and not _alive(int(owner)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed
