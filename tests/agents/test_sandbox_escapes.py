"""Hostile programs that reach past the audit hook: ``dir_fd``-relative writes, unaudited process
control (pidfd, signals), rebuilding a stripped module with ``_imp``; and the kernel layers
(PID namespace, unprivileged user) plus the clean-up of folders left by killed owners.

Every hostile program ends with ``print(True)``: a guard that failed silently would give a True verdict.
"""

import os
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from pipelines.agents import sandbox, sandbox_isolation
from pipelines.agents.sandbox import SandboxLimits, isolation, run_python_sync
from tests.agents.test_sandbox import report

LIMITS = SandboxLimits(wall_time_s=3.0, cpu_time_s=2.0)
STDLIB = Path(os.__file__).parent


def run(code: str):
    result = run_python_sync(code + "\nprint(True)", LIMITS)
    report(result)
    assert result.verdict is None and not result.ok and result.exit_code != 0, result
    return result


# A folder the program may read (the standard library), opened as a directory; then a write relative to it.
DIR_FD_WRITES = {
    "os.open dir_fd": "fd = os.open({stdlib!r}, os.O_RDONLY)\n"
    "w = os.open({name!r}, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)\nos.write(w, b'x = 1')",
    "io.open opener dir_fd": "fd = os.open({stdlib!r}, os.O_RDONLY)\n"
    "f = random.__builtins__['open']({name!r}, 'w', opener=lambda p, fl: os.open(p, fl, dir_fd=fd))\n"
    "f.write('x = 1')\nf.close()",
    "os.open relative": "w = os.open({name!r}, os.O_CREAT | os.O_WRONLY, 0o644)\nos.write(w, b'x')",
    "os.mkdir dir_fd": "fd = os.open({stdlib!r}, os.O_RDONLY)\nos.mkdir({name!r}, dir_fd=fd)",
    "os.symlink dir_fd": "fd = os.open({stdlib!r}, os.O_RDONLY)\nos.symlink('/etc/passwd', {name!r}, dir_fd=fd)",
    "os.rename dst_dir_fd": "fd = os.open({stdlib!r}, os.O_RDONLY)\n"
    "w = os.open(os.getcwd() + '/a', os.O_CREAT | os.O_WRONLY)\nos.rename('a', {name!r}, dst_dir_fd=fd)",
    "os.link dst_dir_fd": "fd = os.open({stdlib!r}, os.O_RDONLY)\n"
    "w = os.open(os.getcwd() + '/a', os.O_CREAT | os.O_WRONLY)\nos.link('a', {name!r}, dst_dir_fd=fd)",
    "os.chmod dir_fd": "fd = os.open({stdlib!r}, os.O_RDONLY)\nos.chmod('os.py', 0o666, dir_fd=fd)",
    "os.unlink dir_fd": "fd = os.open({stdlib!r}, os.O_RDONLY)\nos.unlink({name!r}, dir_fd=fd)",
}


@pytest.mark.parametrize("name", list(DIR_FD_WRITES))
def test_dir_fd_writes_into_a_readable_folder_are_refused(name):
    planted = f"edumas_probe_{uuid.uuid4().hex}.py"  # harmless name: a failed guard must not plant a real sitecustomize
    before = sorted(os.listdir(STDLIB))
    mode = os.stat(STDLIB / "os.py").st_mode
    code = "import random\nos = random._os\n" + DIR_FD_WRITES[name].format(stdlib=str(STDLIB), name=planted)
    try:
        run(code)
        assert not (STDLIB / planted).exists()
        assert sorted(os.listdir(STDLIB)) == before
        assert os.stat(STDLIB / "os.py").st_mode == mode
    finally:
        for leftover in (STDLIB / planted,):
            if leftover.is_dir():
                leftover.rmdir()
            elif leftover.exists() or leftover.is_symlink():
                leftover.unlink()
        os.chmod(STDLIB / "os.py", mode)


def test_the_venv_site_packages_cannot_even_be_opened():
    site = Path(sysconfig.get_path("purelib"))
    planted = f"edumas_probe_{uuid.uuid4().hex}.pth"
    try:
        result = run(
            f"import random\nos = random._os\nfd = os.open({str(site)!r}, os.O_RDONLY)\n"
            f"os.write(os.open({planted!r}, os.O_CREAT | os.O_WRONLY, dir_fd=fd), b'import x')"
        )
        assert "blocked open" in result.stderr
        assert not (site / planted).exists()
    finally:
        (site / planted).unlink(missing_ok=True)


def test_absolute_writes_inside_the_folder_still_work():
    result = run_python_sync(
        "import random\nos = random._os\nb = random.__builtins__\np = os.getcwd() + '/note.txt'\n"
        "b['open'](p, 'w').write('hello')\nprint(b['open'](p).read() == 'hello')",
        LIMITS,
    )
    assert result.verdict is True, result


@pytest.fixture
def victim():
    """A process of the same user, outside the sandbox, that the program tries to kill."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


SIGNALS = {
    "pidfd_send_signal victim": "import random\nos = random._os\nsig = os.sys.modules['_signal']\n"
    "sig.pidfd_send_signal(os.pidfd_open({pid}), 9)",
    "os.kill victim": "import random\nrandom._os.kill({pid}, 9)",
    "os.killpg victim": "import random\nrandom._os.killpg({pid}, 9)",
    "pthread_kill": "import random\nsig = random._os.sys.modules['_signal']\nsig.pthread_kill(1, 0)",
    "pidfd parent": "import random\nos = random._os\nsig = os.sys.modules['_signal']\n"
    "sig.pidfd_send_signal(os.pidfd_open(os.getppid()), 0)",
    "pidfd PID 1 signal 0": "import random\nos = random._os\nsig = os.sys.modules['_signal']\n"
    "sig.pidfd_send_signal(os.pidfd_open(1), 0)",
    "posix rebuilt by _imp.create_builtin": "import random\nsys = random._os.sys\n"
    "p = sys.modules['_imp'].create_builtin(sys.modules['posix'].__spec__)\n"
    "sys.modules['_signal'].pidfd_send_signal(p.pidfd_open({pid}), 9)",
    "_signal rebuilt by _imp.create_builtin": "import random\nsys = random._os.sys\n"
    "s = sys.modules['_imp'].create_builtin(sys.modules['_signal'].__spec__)\n"
    "s.pidfd_send_signal(random._os.pidfd_open({pid}), 9)",
    "wrapper's original via __defaults__": "import random\nsys = random._os.sys\n"
    "f = sys.modules['_imp'].create_builtin\np = f.__defaults__[0](sys.modules['posix'].__spec__)\n"
    "p.kill({pid}, 9)",
    "os.kill PID 1": "import random\nrandom._os.kill(1, 9)",
    "prlimit victim": "import random\nr = random._os.sys.modules['resource']\nr.prlimit({pid}, r.RLIMIT_CPU, (0, 0))",
    "sched_setaffinity victim": "import random\nrandom._os.sched_setaffinity({pid}, {{0}})",
    "setuid/setsid": "import random\nrandom._os.setsid()\nrandom._os.setuid(0)",
}


@pytest.mark.parametrize("name", list(SIGNALS))
def test_process_control_is_refused(name, victim):
    result = run(SIGNALS[name].format(pid=victim.pid))
    assert victim.poll() is None, "the program signalled a process outside the sandbox"
    assert "True" not in result.stdout


# ---------------------------------------------------------------- kernel layers
@pytest.mark.skipif("--pid" not in isolation().namespace_flags, reason="unshare --pid is not permitted here")
def test_program_is_pid_one_of_its_own_pid_namespace():
    result = run_python_sync("import random\nos = random._os\nprint(os.getpid(), os.getppid())", LIMITS)
    assert result.ok, result
    assert result.stdout.split() == ["1", "0"]


def test_root_drops_to_nobody_only_when_nobody_cannot_write_the_protected_paths(request, monkeypatch):
    if os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs root and a system interpreter that uid 65534 can start")
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    monkeypatch.setattr(sandbox_isolation, "protected_paths", lambda runner: ["/usr/lib", str(runner)])
    assert sandbox_isolation._choose_user(sandbox.RUNNER) == (65534, None)
    writable = Path(tempfile.mkdtemp(prefix="edumas-test-venv-", dir="/tmp"))  # nobody can reach it
    request.addfinalizer(lambda: writable.rmdir())
    os.chown(writable, 65534, 65534)
    monkeypatch.setattr(sandbox_isolation, "protected_paths", lambda runner: ["/usr/lib", str(writable)])
    user, note = sandbox_isolation._choose_user(sandbox.RUNNER)
    assert user is None and f"could write {writable}" in note


def test_isolation_says_why_root_is_kept():
    found = isolation()
    if os.geteuid() == 0 and found.user is None:
        assert any("uid 65534" in note and "runs as root" in note for note in found.notes), found
    if found.user is not None:
        result = run_python_sync(f"import random\nprint(random._os.access({os.__file__!r}, 2))", LIMITS)
        assert result.stdout.strip() == "False", result


def test_folders_of_dead_owners_are_cleaned_others_kept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"edumas-sandbox-{dead.pid}-abc"
    mine = tmp_path / f"edumas-sandbox-{os.getpid()}-abc"
    legacy = tmp_path / "edumas-sandbox-x1y2z3"
    for folder in (gone, mine, legacy):
        (folder / "sub").mkdir(parents=True)
    assert sandbox_isolation.clean_leftovers(str(tmp_path)) == [str(gone)]
    assert not gone.exists() and mine.exists() and legacy.exists()


STAGE = """
import sys
from pipelines.agents.sandbox import SandboxLimits, run_python_sync
run_python_sync("import time\\ntime.sleep(60)", SandboxLimits(wall_time_s=60, cpu_time_s=5, allowed_imports=["time"]))
"""


def _processes_in(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd") == str(folder):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _wait_for(condition, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return condition()


def test_killed_stage_leaves_no_program_running_and_its_folder_is_cleaned_next_start(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(Path(sandbox.__file__).parents[2])}
    stage = subprocess.Popen([sys.executable, "-c", STAGE], env=env)
    try:
        folder = _wait_for(lambda: next(tmp_path.glob(f"edumas-sandbox-{stage.pid}-*"), None), 30)
        assert folder is not None
        assert _wait_for(lambda: _processes_in(folder), 10), "the sandboxed program did not start"
    finally:
        stage.kill()
        stage.wait()
    assert _wait_for(lambda: not _processes_in(folder), 5), "the program outlived its killed stage"
    assert folder.exists()  # nobody could delete it yet
    assert sandbox_isolation.clean_leftovers(str(tmp_path)) == [str(folder)]
