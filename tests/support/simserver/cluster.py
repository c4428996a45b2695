"""Several simulated servers in one process of their own, for tests, benchmarks and Slurm jobs.

From the command line (``python -m tests.support.simserver``): starts ``--servers`` servers on
consecutive free ports, prints ``READY <url> <url> ...`` once all listen, serves until SIGTERM or
SIGINT, then writes every server's :meth:`SimServer.stats` to ``--stats`` (JSON). From Python::

    with SimCluster(servers=8, compression=20, log_dir=tmp) as cluster:
        urls = cluster.urls          # one base URL per server
    cluster.stats                    # read after the block (the process has stopped)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support.simserver.batches import BatchAPI, BatchFaults
from tests.support.simserver.engine import EngineModel
from tests.support.simserver.server import Faults, SimServer

PROJECT = Path(__file__).resolve().parents[3]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    model, faults = EngineModel(), Faults()
    parser.add_argument("--servers", type=int, default=1, help="servers (each its own engine and port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="port of the first server (0: any free ports)")
    parser.add_argument("--compression", type=float, default=1.0, help="virtual seconds per real second")
    parser.add_argument("--max-num-seqs", type=int, default=model.max_num_seqs)
    parser.add_argument("--decode-base-s", type=float, default=model.decode_base_s)
    parser.add_argument("--decode-per-seq-s", type=float, default=model.decode_per_seq_s)
    parser.add_argument("--prefill-tokens-per-s", type=float, default=model.prefill_tokens_per_s)
    parser.add_argument("--no-prefix-caching", action="store_true")
    parser.add_argument("--rate-429", type=float, default=faults.rate_429)
    parser.add_argument("--rate-5xx", type=float, default=faults.rate_5xx)
    parser.add_argument("--retry-after-s", type=float, default=faults.retry_after_s)
    parser.add_argument("--max-waiting", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-dir", default=None, help="one request log (JSON lines) per server here")
    parser.add_argument("--stats", default=None, help="write the servers' stats here (JSON) on exit")
    parser.add_argument(
        "--served-model-name",
        nargs="+",
        default=["simulated"],
        help="the model names GET /v1/models lists (as vllm serve's flag)",
    )
    parser.add_argument("--url-file", default=None, help="also write the base URLs here, one per line")
    batch = BatchFaults()
    parser.add_argument("--batch-delay-s", type=float, default=batch.delay_s, help="real seconds a batch runs")
    parser.add_argument("--batch-expire-rate", type=float, default=batch.expire_rate)
    parser.add_argument("--batch-error-rate", type=float, default=batch.error_rate)
    parser.add_argument(
        "--batch-faulty-batches",
        type=int,
        default=batch.faulty_batches,
        help="the first N batches of each server have the expiries and errors",
    )


def servers_from(args: argparse.Namespace) -> list[SimServer]:
    model = EngineModel(
        decode_base_s=args.decode_base_s,
        decode_per_seq_s=args.decode_per_seq_s,
        prefill_tokens_per_s=args.prefill_tokens_per_s,
        max_num_seqs=args.max_num_seqs,
        prefix_caching=not args.no_prefix_caching,
        compression=args.compression,
    )
    out = []
    for i in range(args.servers):
        faults = Faults(args.rate_429, args.rate_5xx, args.retry_after_s, args.max_waiting, seed=args.seed + i)
        log = Path(args.log_dir) / f"server-{i}.jsonl" if args.log_dir else None
        port = args.port + i if args.port else 0
        server = SimServer(
            model,
            faults=faults,
            host=args.host,
            port=port,
            log_path=log,
            name=f"sim-{i}",
            served_model_names=tuple(args.served_model_name),
        )
        BatchAPI(
            server,
            BatchFaults(
                args.batch_delay_s,
                args.batch_expire_rate,
                args.batch_error_rate,
                args.batch_faulty_batches,
                seed=args.seed + i,
            ),
        )
        out.append(server)
    return out


async def _main(args: argparse.Namespace) -> None:
    servers = servers_from(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    for server in servers:
        await server.start()
    try:
        urls = [s.url for s in servers]
        if args.url_file:
            Path(args.url_file).write_text("\n".join(urls) + "\n", encoding="utf-8")
        print("READY " + " ".join(urls), flush=True)
        await stop.wait()
    finally:
        stats = [s.stats() for s in servers]
        for server in servers:
            await server.stop()
    if args.stats:
        Path(args.stats).write_text(json.dumps(stats, indent=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.simserver", description=__doc__.split("\n")[0])
    add_arguments(parser)
    asyncio.run(_main(parser.parse_args(argv)))


class SimCluster:
    """``servers`` simulated servers in a child process; ``urls`` while running, ``stats`` after :meth:`stop`."""

    def __init__(
        self, *, servers: int = 1, compression: float = 1.0, log_dir: Path | str | None = None, **options: Any
    ):
        self._tmp = tempfile.TemporaryDirectory(prefix="simserver-")
        self.stats_path = Path(self._tmp.name) / "stats.json"
        self.log_dir = Path(log_dir) if log_dir else None
        argv = ["--servers", str(servers), "--compression", str(compression), "--stats", str(self.stats_path)]
        if self.log_dir is not None:
            argv += ["--log-dir", str(self.log_dir)]
        for key, value in options.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif isinstance(value, (list, tuple)):
                argv += [flag, *map(str, value)]
            elif value not in (None, False):
                argv += [flag, str(value)]
        self.argv = argv
        self.urls: list[str] = []
        self.stats: list[dict[str, Any]] = []
        self._process: subprocess.Popen | None = None

    def start(self) -> SimCluster:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
        command = [sys.executable, "-m", "tests.support.simserver", *self.argv]
        self._process = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, text=True, env=env)
        line = self._process.stdout.readline().strip() if self._process.stdout else ""
        if not line.startswith("READY "):
            self._process.kill()
            raise RuntimeError(f"simulated servers did not start (got {line!r}); command: {' '.join(command)}")
        self.urls = line.split()[1:]
        return self

    def stop(self) -> list[dict[str, Any]]:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            self._process.wait(timeout=30)
        if self.stats_path.exists():
            self.stats = json.loads(self.stats_path.read_text(encoding="utf-8"))
        self._tmp.cleanup()
        return self.stats

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
