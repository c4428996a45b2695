"""A real Chroma server process (``chroma run``) for tests and benchmarks of the server backend.

    with ChromaServer(tmp_path / "kb") as server:
        cfg = StoreConfig(path=str(tmp_path / "kb"), backend="server", server=server.config)

The ``chroma`` command comes from the environment running Python (the venv's ``bin``) or PATH;
:func:`chroma_command` is None where chromadb's command is not installed (callers skip then).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from pipelines.retrieval.config import ChromaServerConfig


def chroma_command() -> str | None:
    beside = Path(sys.executable).parent / "chroma"
    return str(beside) if beside.exists() else shutil.which("chroma")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ChromaServer:
    """``chroma run --path <path> --host 127.0.0.1 --port <free port>``, waited for until it answers."""

    def __init__(self, path: Path | str, *, port: int | None = None, start_timeout_s: float = 90.0):
        self.path = Path(path)
        self.port = port or free_port()
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None
        self.log = self.path.parent / f"chroma-{self.port}.log"

    @property
    def config(self) -> ChromaServerConfig:
        return ChromaServerConfig(host="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ChromaServer:
        command = chroma_command()
        if command is None:
            raise RuntimeError("the chroma command is not installed (pip install chromadb)")
        self.path.mkdir(parents=True, exist_ok=True)
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [command, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=2).read()
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        tail = self.log.read_text()[-2000:]
        raise RuntimeError(f"chroma run did not answer within {self.start_timeout_s:.0f} s: {tail}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> ChromaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
