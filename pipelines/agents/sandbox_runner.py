"""Child-side bootstrap of the code sandbox: runs ONE untrusted Python program and exits.

Started by :mod:`pipelines.agents.sandbox` as
``python -I -S -X utf8 -c "<import this module, call main()>" CPU_S MEMORY_BYTES FILE_BYTES ALLOWED_IMPORTS STAGE_PID``
(or ``python -I -S -X utf8 sandbox_runner.py ...``) with the
program's source on stdin, an empty environment and a fresh temporary folder as cwd. It must stay
standard-library only and cheap to start (no site, no json, no traceback module).

Order of work: fork (this process waits and passes the child's status on, see
:func:`_run_in_child`); in the child read the source, compile it, lower the resource limits (CPU,
address space, file size, open files, processes, core dumps), build the builtins the program sees (no ``open``,
``exec``, ``eval``, ``compile``, ``input``, ``breakpoint``; ``__import__`` replaced by an
allow-list guard), install an audit hook (it can never be removed) and run the program as
``__main__``.

The audit hook is the enforcement layer; the builtins and the import guard are only the first
fence, because module attributes (``random._os``), ``__subclasses__`` and ``__globals__`` reach
the real objects. The hook is default-deny: a known set of harmless events passes; imports pass
only for allowed modules and the standard-library internals they load lazily (others look like a
missing module); files may be read only under the temporary folder and the standard library,
written only under the temporary folder (at most ``MAX_WRITE_OPENS`` times), always by absolute
path (the events do not carry ``dir_fd``, so a relative path may resolve anywhere); every other event
(``os.system``, ``subprocess.Popen``, ``os.fork``, ``os.exec``, ``socket.*``, ``ctypes.*``,
``gc.get_referrers``, ``sys.settrace``, ``code.__new__``, ...) ends the process at once with
``EXIT_FORBIDDEN_OPERATION``. The hook keeps everything it uses in default arguments bound at
install time, so rebinding names in ``builtins``/``os`` from the program cannot change its checks.

Exit codes: the program's own code (``sys.exit``), 1 for an uncaught exception (a short
traceback with line numbers goes to stderr), ``EXIT_MEMORY`` for ``MemoryError``,
``EXIT_FORBIDDEN_IMPORT`` for an uncaught import refused by the guard, ``EXIT_FORBIDDEN_OPERATION``
for a blocked audit event.

Not covered (CPython raises no audit event): ``os.stat``/``os.readlink``/``os.access`` on outside
paths still answer, so the program can learn whether a file exists and its size, not its content.
"""

import _imp
import _signal
import _thread
import builtins
import io
import os
import posix
import resource
import sys

EXIT_FORBIDDEN_IMPORT = 117
EXIT_FORBIDDEN_OPERATION = 118
EXIT_MEMORY = 119
MAX_WRITE_OPENS = 64
MAX_OPEN_FILES = 32
ORPHAN_CHECK_S = 0.5

# Pure-computation standard-library modules that the default allowed modules import, eagerly or lazily
# (found by tracing "import" audit events while exercising them). They stay importable whatever
# ``allowed_imports`` says, because C code imports them through the program's ``__import__``
# (``datetime.strptime`` -> ``_strptime``) and ``fractions`` needs ``decimal``. Importing anything
# else looks like a missing module.
# fmt: off
LAZY_INTERNALS = frozenset((
    "_bisect", "_collections", "_contextvars", "_datetime", "_decimal", "_functools", "_heapq", "_locale",
    "_operator", "_pydecimal", "_random", "_sha512", "_sre", "_statistics", "_string", "_strptime", "_struct",
    "_weakrefset", "bisect", "calendar", "cmath", "collections", "collections.abc", "contextvars", "copy", "copyreg",
    "datetime", "decimal", "encodings", "enum", "fractions", "functools", "heapq", "itertools", "keyword",
    "linecache", "locale", "math", "numbers", "operator", "random", "re", "re._casefix", "re._compiler",
    "re._constants", "re._parser", "reprlib", "statistics", "string", "stringprep", "struct", "token", "tokenize",
    "types", "unicodedata", "warnings", "weakref",
))
# fmt: on

# Audit events that cannot reach outside the process.
# fmt: off
HARMLESS_EVENTS = frozenset((
    "exec", "compile", "object.__delattr__", "sys._getframe", "sys._getframemodulename",
    "time.sleep", "builtins.id", "array.__new__", "function.__new__", "sys.excepthook",
    "sys.unraisablehook", "sys.set_asyncgen_hooks_firstiter", "sys.set_asyncgen_hooks_finalizer",
    "cpython.PyInterpreterState_Clear", "cpython._PySys_ClearAuditHooks",
))
# fmt: on
PROTECTED_FUNCTION_ATTRIBUTES = frozenset(("__code__", "__defaults__", "__kwdefaults__"))
# Readable attributes that would hand out what a guard keeps in its default arguments (the real
# ``_imp.create_builtin``); reading a function's ``__code__`` stays allowed.
SECRET_FUNCTION_ATTRIBUTES = frozenset(("__defaults__", "__kwdefaults__"))
WRITE_FLAGS = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND


class ForbiddenImport(ModuleNotFoundError):
    """An import the sandbox refuses (looks like a missing module, so stdlib fallbacks still work)."""


def _within(path, roots, _type=type, _str=str, _bytes=bytes, _decode=bytes.decode, _split=str.split):
    """True when ``path`` (exact str/bytes) is absolute and lies under one of ``roots``.

    A relative path is never inside: the audit events do not carry ``dir_fd``, so ``os.open("x",
    dir_fd=fd)`` would be judged as if relative to the sandbox folder while the kernel resolves it
    in whatever folder ``fd`` is (the standard library's, say). The kernel ignores ``dir_fd`` for
    absolute paths."""
    if _type(path) is _bytes:
        path = _decode(path, "utf-8", "surrogateescape")
    elif _type(path) is not _str:
        return False
    if not path.startswith("/") or ".." in _split(path, "/") or "\x00" in path:
        return False
    for root in roots:  # noqa: SIM110 -- a plain loop: ``any`` could be rebound by the program
        if path == root or path.startswith(root + "/"):
            return True
    return False


def _blocked(what, reason, _write=posix.write, _encode=str.encode, _exit=posix._exit, _code=EXIT_FORBIDDEN_OPERATION):
    """Say on stderr what was blocked and end the process at once."""
    _write(2, _encode("\nsandbox: blocked " + what + ": " + reason + "\n", "utf-8", "replace"))
    _exit(_code)


def _importable(name, allowed_tops, _lazy=LAZY_INTERNALS, _partition=str.partition, _startswith=str.startswith):
    """Whether the exact str ``name`` is an allowed module or an internal the allowed ones load."""
    return _partition(name, ".")[0] in allowed_tops or name in _lazy or _startswith(name, "encodings.")


def _make_hook(tmp, stdlib, allowed_tops):
    """The audit hook; all state lives in default arguments so the program cannot rebind it."""

    def hook(
        event,
        args,
        _harmless=HARMLESS_EVENTS,
        _allowed=allowed_tops,
        _protected=PROTECTED_FUNCTION_ATTRIBUTES,
        _secret=SECRET_FUNCTION_ATTRIBUTES,
        _write_flags=WRITE_FLAGS,
        _reads=(tmp, stdlib),
        _writes=(tmp,),
        _stdlib=(stdlib,),
        _within=_within,
        _writes_left=[MAX_WRITE_OPENS],  # noqa: B006 -- the write budget of this run, private to the hook
        _last_pyc=[None],  # noqa: B006 -- the standard-library .pyc the import system opened last
        _open_code=io.open_code,
        _type=type,
        _str=str,
        _int=int,
        _importable=_importable,
        _blocked=_blocked,
        _forbidden=ForbiddenImport,
    ):
        if event in _harmless:
            return
        if event == "import":
            name, filename = args[0], args[1]
            if _type(name) is not _str or (filename is not None and not _within(filename, _stdlib)):
                reason = "import of a module from outside the standard library"
            elif _importable(name, _allowed):
                return
            else:
                raise _forbidden("No module named " + repr(name) + " (not allowed in the sandbox)")
        elif event == "open":
            path, mode, flags = args
            if _type(path) is _int:
                return
            writes = (_type(flags) is _int and flags & _write_flags) or (
                _type(mode) is _str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)
            )
            if not writes and _within(path, _reads):
                if _type(path) is _str and path.endswith(".pyc") and _within(path, _stdlib):
                    _last_pyc[0] = path
                return
            if writes and _within(path, _writes) and _writes_left[0] > 0:
                _writes_left[0] -= 1
                return
            reason = "open() of a relative path or outside the sandbox folder, or too many file writes"
        elif event == "marshal.loads":
            # The import system unmarshals the .pyc it just opened; anything else could be crafted
            # bytecode (memory corruption), so the bytes must equal that file's code section.
            path, _last_pyc[0] = _last_pyc[0], None
            if path is not None:
                with _open_code(path) as file:
                    body = file.read()[16:]
                _last_pyc[0] = None
                if body == args[0]:
                    return
            reason = "unmarshalling bytes that are not standard-library bytecode"
        elif event == "os.listdir" or event == "os.scandir":
            if _within(args[0], _reads):
                return
            reason = "listing a folder outside the sandbox"
        elif event == "object.__getattr__":
            if _type(args[1]) is _str and args[1] not in _secret:
                return
            reason = "reading a function's defaults"
        elif event == "object.__setattr__":
            if _type(args[1]) is _str and args[1] not in _protected:
                return
            reason = "changing a function's code or defaults"
        else:
            reason = "operation not allowed"
        _blocked(event, reason)

    return hook


def _make_import_guard(allowed_tops, _real_import=builtins.__import__, _type=type, _str=str, _module=type(sys)):
    """``__import__`` for the program: allow-listed top-level modules (and the internals they import
    lazily from C, which goes through the caller's ``__import__``), no relative imports."""

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0, _lazy=LAZY_INTERNALS):
        if _type(name) is not _str or level != 0 or (name.partition(".")[0] not in allowed_tops and name not in _lazy):
            raise ForbiddenImport(f"import of {name!r} is not allowed in the sandbox; allowed: {sorted(allowed_tops)}")
        module = _real_import(name, globals, locals, fromlist, level)
        for item in fromlist or ():
            value = getattr(module, item, None) if _type(item) is _str and item != "*" else None
            if _type(value) is _module and value.__name__.partition(".")[0] not in allowed_tops:
                raise ForbiddenImport(f"import of {name}.{item} is not allowed in the sandbox")
        return module

    return guarded_import


def _program_builtins(allowed_tops):
    """A copy of builtins without the escape hatches and with the guarded ``__import__``."""
    names = dict(builtins.__dict__)
    for name in ("open", "exec", "eval", "compile", "breakpoint", "input", "help", "exit", "quit", "copyright",
                 "credits", "license", "__loader__", "__spec__"):  # fmt: skip
        names.pop(name, None)
    names["__import__"] = _make_import_guard(allowed_tops)
    return names


# Functions CPython does not audit (or audits, but need not be there) that create files (mkfifo,
# mknod), threads (a second thread could change a buffer between the hook's check and its use), or
# reach other processes or the process's identity (pidfd, signals, ids, sessions, namespaces,
# scheduling); removed before the program runs. ``_imp`` could build fresh copies of these modules,
# so its module constructors are guarded too (:func:`_guard_module_rebuild`).
# fmt: off
PROCESS_CONTROL = (
    "kill", "killpg", "pidfd_open", "setns", "unshare", "setsid", "setpgid", "setpgrp", "tcsetpgrp", "setuid",
    "seteuid", "setreuid", "setresuid", "setgid", "setegid", "setregid", "setresgid", "setgroups", "initgroups",
    "sched_setaffinity", "sched_setscheduler", "sched_setparam", "setpriority", "nice", "waitpid", "wait",
    "wait3", "wait4", "waitid",
)
UNAUDITED = (
    (os, ("mkfifo", "mknod", *PROCESS_CONTROL)), (posix, ("mkfifo", "mknod", *PROCESS_CONTROL)),
    (_thread, ("start_new_thread", "start_new")),
    (_signal, ("pidfd_send_signal", "pthread_kill", "sigqueue", "signal", "siginterrupt", "pthread_sigmask")),
)
# fmt: on


def _remove_unaudited():
    for module, names in UNAUDITED:
        for name in names:
            module.__dict__.pop(name, None)


class _Spec:
    """The two attributes ``_imp``'s constructors read, copied once (a crafted spec could answer
    ``math`` to the guard and ``posix`` to the constructor)."""

    __slots__ = ("name", "origin")

    def __init__(self, name, origin):
        self.name, self.origin = name, origin


def _guard_module_rebuild(allowed_tops):
    """``_imp.create_builtin``/``create_dynamic`` build a fresh copy of a module, with every function
    removed above; let them build only a module the import hook allows and that is not loaded yet
    (the import system calls them only then). The real ones live in the guards' defaults, which the
    audit hook does not let the program read."""
    for name in ("create_builtin", "create_dynamic"):
        _imp.__dict__[name] = _make_rebuild_guard(_imp.__dict__[name], allowed_tops)


def _make_rebuild_guard(real, allowed_tops):
    def guarded(
        spec,
        *args,
        _real=real,
        _allowed=allowed_tops,
        _modules=sys.modules,
        _spec=_Spec,
        _getattr=getattr,
        _type=type,
        _str=str,
        _importable=_importable,
        _blocked=_blocked,
    ):
        name = _getattr(spec, "name", None)
        if _type(name) is not _str:
            _blocked("_imp", "a module spec without a str name")
        if name in _modules or not _importable(name, _allowed):
            _blocked("_imp", "rebuilding or loading module " + name)
        return _real(_spec(name, _getattr(spec, "origin", None)), *args)

    return guarded


def _run_in_child(stage):
    """Fork; the child returns and runs the program, this process waits for it and ends the same way.

    Started under ``unshare --pid`` the child is PID 1 of a new PID namespace: no process outside
    it has a number it could name. This process also kills the child when its parent is no longer
    ``stage`` (the stage's pid: it died, even before this started), so a killed stage leaves no
    program running. Returns only in the child."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the status is passed on by a signal to this process
    child = posix.fork()
    if child == 0:
        return

    def orphaned(signum, frame):
        if posix.getppid() != stage:
            posix.kill(child, _signal.SIGKILL)

    _signal.signal(_signal.SIGALRM, orphaned)
    _signal.setitimer(_signal.ITIMER_REAL, ORPHAN_CHECK_S, ORPHAN_CHECK_S)
    status = posix.waitpid(child, 0)[1]
    _signal.setitimer(_signal.ITIMER_REAL, 0, 0)
    if posix.WIFSIGNALED(status):
        signum = posix.WTERMSIG(status)
        if signum != _signal.SIGKILL:
            _signal.signal(signum, _signal.SIG_DFL)
        posix.kill(posix.getpid(), signum)
    posix._exit(posix.WEXITSTATUS(status) if posix.WIFEXITED(status) else 1)


def _set_limits(cpu_s, memory_bytes, file_bytes):
    """Lower soft and hard limits (never raised again: the hook blocks resource.setrlimit)."""
    for limit, value, hard in (
        (resource.RLIMIT_CPU, cpu_s, cpu_s),  # SIGKILL at the limit: PID 1 of a namespace ignores SIGXCPU
        (resource.RLIMIT_AS, memory_bytes, memory_bytes),
        (resource.RLIMIT_FSIZE, file_bytes, file_bytes),
        (resource.RLIMIT_NOFILE, MAX_OPEN_FILES, MAX_OPEN_FILES),
        (resource.RLIMIT_NPROC, 0, 0),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(limit, (value, hard))


def _report(exc):
    """Print a short traceback (line numbers of the program only) and the exception to stderr."""
    lines, tb = [], exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<sandbox>":
            lines.append(tb.tb_lineno)
        tb = tb.tb_next
    try:
        message = f"{type(exc).__name__}: {exc}"
    except BaseException:
        message = type(exc).__name__
    sys.stderr.write(f"Traceback (sandbox, line numbers): {lines}\n{message}\n")


def _finish(code):
    """Flush what the program printed and leave without running finalizers."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 1
    posix._exit(code)


def main():
    _run_in_child(int(sys.argv[5]))
    cpu_s, memory_bytes, file_bytes = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    allowed_tops = frozenset(name for name in sys.argv[4].split(",") if name)
    source = sys.stdin.buffer.read().decode("utf-8", "replace")
    try:
        program = compile(source, "<sandbox>", "exec")
    except (SyntaxError, ValueError) as exc:
        sys.stderr.write(f"SyntaxError: {getattr(exc, 'msg', exc)} (line {getattr(exc, 'lineno', '?')})\n")
        _finish(1)
    tmp = posix.getcwd()
    stdlib = os.path.dirname(os.__file__)
    namespace = {"__name__": "__main__", "__doc__": None, "__builtins__": _program_builtins(allowed_tops)}
    sys.set_int_max_str_digits(0)  # big exact integers are normal in math checks; the CPU limit bounds the cost
    _set_limits(cpu_s, memory_bytes, file_bytes)
    _remove_unaudited()
    _guard_module_rebuild(allowed_tops)
    sys.addaudithook(_make_hook(tmp, stdlib, allowed_tops))
    del source
    try:
        exec(program, namespace)
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, bool | int):
            code = int(code or 0)
            _finish(code if 0 <= code <= 255 else 1)
        sys.stderr.write(f"{code}\n")
        _finish(1)
    except MemoryError as exc:
        _report(exc)
        _finish(EXIT_MEMORY)
    except ForbiddenImport as exc:
        _report(exc)
        _finish(EXIT_FORBIDDEN_IMPORT)
    except BaseException as exc:
        _report(exc)
        _finish(1)
    _finish(0)


if __name__ == "__main__":
    main()
