"""Hostile programs that reach past the audit hook: ``dir_fd``-relative writes, unaudited process
control (pidfd, signals), rebuilding a stripped module with ``_imp``; and the kernel layers
(PID namespace, unprivileged user) plus the clean-up of folders left by killed owners.

Every hostile program ends with ``print(True)``: a guard that failed silently would give a True verdict.
"""

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pipelines.agents import sandbox
from pipelines.agents.sandbox import SandboxLimits, isolation, run_python_sync

LIMITS = SandboxLimits(wall_time_s=3.0, cpu_time_s=2.0)
STDLIB = Path(os.__file__).parent


def run(code: str):
    result = run_python_sync(code + "\nprint(True)", LIMITS)
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
    "setuid/setsid": "import random\nrandom._os.setsid()\nrandom._os.setuid(0)",
}


@pytest.mark.parametrize("name", list(SIGNALS))
def test_process_control_is_refused(name, victim):
    result = run(SIGNALS[name].format(pid=victim.pid))
    assert victim.poll() is None, "the program signalled a process outside the sandbox"
    assert "True" not in result.stdout
