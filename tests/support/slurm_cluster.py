"""A real one-host Slurm cluster for tests: Debian's ``slurm-wlm`` and ``munge``, CPU only.

:func:`ensure_slurm` installs the packages when their commands are missing (``apt-get``, as root)
and returns why it cannot where it cannot (the caller skips with that message). :class:`SlurmCluster`
writes a private configuration under a folder of its own (its own munge key and socket, its own
ports, state, spool and logs: nothing under ``/etc`` changes and a system Slurm is left alone),
starts ``munged``, ``slurmctld`` and ``slurmd`` in the foreground as child processes and waits for
the node to be idle; :meth:`SlurmCluster.stop` ends exactly those processes.

    with SlurmCluster(tmp_path / "slurm") as cluster:
        job = cluster.sbatch(["--array=0-1", "configs/slurm/generate_shards.sbatch"], env=..., cwd=project)
        states = cluster.wait([job])          # {"123_0": "COMPLETED", "123_1": "COMPLETED"}

Finished jobs are read from the job-completion log (``jobcomp/filetxt``), so their final state is
known without an accounting database.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

COMMANDS = ("sbatch", "squeue", "scontrol", "slurmctld", "slurmd", "munged", "mungekey")
PACKAGES = ("slurm-wlm", "munge")
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE"}


def _missing() -> list[str]:
    return [c for c in COMMANDS if shutil.which(c) is None and not Path(f"/usr/sbin/{c}").exists()]


def ensure_slurm(timeout_s: float = 600) -> str | None:
    """None when Slurm's and munge's commands are there (installed now if need be), else why not."""
    if not _missing():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"Slurm is not installed ({', '.join(_missing())} missing) and apt-get as root is not available"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    for step in (["apt-get", "update"], install):
        try:
            done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(step)}` did not finish within {timeout_s:.0f} s"
        if done.returncode != 0 and step is install:
            return f"`{' '.join(install)}` failed: {(done.stderr or done.stdout)[-500:]}"
    return None if not _missing() else f"after apt-get install, still missing: {', '.join(_missing())}"


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SlurmCluster:
    """controller + node daemon on this host, configured under ``folder`` (see the module docstring)."""

    def __init__(self, folder: Path | str, *, cpus: int | None = None, start_timeout_s: float = 60.0):
        self.folder = Path(folder).resolve()
        self.cpus = cpus or os.cpu_count() or 1
        self.start_timeout_s = start_timeout_s
        self.node = socket.gethostname().split(".")[0]
        self.conf = self.folder / "slurm.conf"
        self.jobcomp = self.folder / "jobcomp.txt"
        self.munge_socket = self.folder / "munge" / "munge.sock"
        self._daemons: list[subprocess.Popen] = []

    @property
    def env(self) -> dict[str, str]:
        """The environment Slurm's client commands need to find this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _write_config(self) -> None:
        for sub in ("munge", "state", "spool", "log"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        (self.folder / "munge").chmod(0o755)
        key = self.folder / "munge" / "munge.key"
        if not key.exists():
            subprocess.run([_sbin("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True)
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        f = self.folder
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=edumas-test",
                    f"SlurmctldHost={self.node}(127.0.0.1)",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    f"StateSaveLocation={f / 'state'}",
                    f"SlurmdSpoolDir={f / 'spool'}",
                    f"SlurmctldPidFile={f / 'slurmctld.pid'}",
                    f"SlurmdPidFile={f / 'slurmd.pid'}",
                    f"SlurmctldLogFile={f / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={f / 'log' / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "JobCompType=jobcomp/filetxt",
                    f"JobCompLoc={self.jobcomp}",
                    "SchedulerType=sched/backfill",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "ReturnToService=2",
                    "MpiDefault=none",
                    "MinJobAge=3600",
                    f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={memory_mb} State=UNKNOWN",
                    f"PartitionName=test Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            ),
            encoding="utf-8",
        )

    def _daemon(self, command: list[str], log: str) -> subprocess.Popen:
        handle = (self.folder / "log" / log).open("w")
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=self.env)
        self._daemons.append(process)
        return process

    def start(self) -> SlurmCluster:
        self._write_config()
        munge = self.folder / "munge"
        self._daemon(
            [_sbin("munged"), "-F", "--force", "-S", str(self.munge_socket), f"--key-file={munge / 'munge.key'}",
             f"--pid-file={munge / 'munged.pid'}", f"--seed-file={munge / 'munged.seed'}",
             f"--log-file={munge / 'munged.log'}"],
            "munged.out",
        )
        self._wait_for(self.munge_socket.exists, "munged did not create its socket")
        self._daemon([_sbin("slurmctld"), "-D", "-f", str(self.conf)], "slurmctld.out")
        self._daemon([_sbin("slurmd"), "-D", "-f", str(self.conf)], "slurmd.out")
        self._wait_for(self._node_idle, "the node did not become idle")
        return self

    def _node_idle(self) -> bool:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
        return done.returncode == 0 and done.stdout.strip().rstrip("*") == "idle"

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            dead = [p for p in self._daemons if p.poll() is not None]
            if dead:
                self.stop()
                raise RuntimeError(f"{dead[0].args[0]} exited with {dead[0].returncode}: {self.logs()}")
            if ready():
                return
            time.sleep(0.3)
        logs = self.logs()
        self.stop()
        raise RuntimeError(f"{what} within {self.start_timeout_s:.0f} s: {logs}")

    def logs(self) -> str:
        """The tail of every daemon log (for failure messages)."""
        parts = []
        for path in sorted((self.folder / "log").glob("*")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)

    def sbatch(self, args: list[str], *, env: dict[str, str] | None = None, cwd: Path | str | None = None) -> str:
        """Submit a job (``sbatch --parsable``); returns its id."""
        done = subprocess.run(
            ["sbatch", "--parsable", *args], env={**self.env, **(env or {})}, cwd=cwd, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout.strip().split(";")[0]

    def finished(self) -> dict[str, str]:
        """Final state of every job that ended, by id (array tasks as ``<array job>_<task>``)."""
        if not self.jobcomp.exists():
            return {}
        states = {}
        for line in self.jobcomp.read_text().splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            job = fields.get("JobId", "")
            if fields.get("ArrayJobId") and fields.get("ArrayTaskId") not in (None, "", "4294967294"):
                job = f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
            states[job] = fields.get("JobState", "")
        return states

    def wait(self, jobs: list[str], *, expect: dict[str, int] | None = None, timeout_s: float = 600) -> dict[str, str]:
        """Wait until every job of ``jobs`` (an array: all ``expect[job]`` tasks) has a final state."""
        expect = expect or {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = self.finished()
            mine = {j: s for j, s in states.items() if j.split("_")[0] in jobs}
            complete = all(
                sum(1 for j in mine if j.split("_")[0] == job) >= expect.get(job, 1) for job in jobs
            )
            if complete and all(s in FINAL for s in mine.values()):
                return mine
            time.sleep(1.0)
        raise TimeoutError(f"jobs {jobs} not finished within {timeout_s:.0f} s; queue: {self.queue()}\n{self.logs()}")

    def queue(self) -> str:
        return subprocess.run(["squeue", "-a"], env=self.env, capture_output=True, text=True).stdout

    def stop(self) -> None:
        for process in reversed(self._daemons):
            if process.poll() is None:
                process.terminate()
        for process in reversed(self._daemons):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._daemons.clear()

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
