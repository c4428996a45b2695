"""One stage run of the paper-scale benchmark, measured: wall time, CPU and peak RSS of the stage
process (``os.wait4``), what the simulated servers served meanwhile (their ``/sim/stats``), the
critical-path bound of those servers, and the bytes the stage wrote per item.

The bound is the least time the servers could have needed for the work they were given: every
server's uncached prefill at the model's prefill rate plus its output tokens at the best per-token
cost the run's concurrency allows (``B = min(max_num_seqs, ceil(concurrency / servers))`` sequences
per server, ``tpot(B) / B`` seconds per token), the busiest server's total (in virtual seconds);
the virtual time of the stage's LLM phase (first request to last reply, from the servers' request
logs, times the compression) over it is the ratio the goal is set on; the whole stage's wall time
(start-up, model loading, baselines and exports included) is reported beside it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.simserver.engine import EngineModel

PROJECT = Path(__file__).resolve().parents[2]
OUTPUTS = {"tagging": "tagging", "kgc": "kgc", "ram2c": "ram2c"}


def stage_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "EDUMAS_TRACKING": "0",
        "WANDB_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
    }


def server_stats(urls: list[str]) -> list[dict[str, Any]]:
    return [json.loads(urllib.request.urlopen(u.removesuffix("/v1") + "/sim/stats", timeout=30).read()) for u in urls]


def answered(urls: list[str]) -> int:
    return sum(s["counts"]["answered"] for s in server_stats(urls))


def _delta(after: list[dict], before: list[dict]) -> list[dict[str, float]]:
    keys = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens", "busy_s", "prefill_s")
    out = []
    for a, b in zip(after, before, strict=True):
        row = {k: a["engine"][k] - b["engine"][k] for k in keys}
        row["answered"] = a["counts"]["answered"] - b["counts"]["answered"]
        row["refused"] = sum(a["counts"][k] - b["counts"][k] for k in ("refused_429", "refused_5xx"))
        out.append(row)
    return out


def critical_path_bound(per_server: list[dict[str, float]], model: EngineModel, concurrency: int) -> float:
    """Virtual seconds the busiest server needs at the best batch the concurrency allows (module docstring)."""
    batch = max(1, min(model.max_num_seqs, math.ceil(concurrency / max(1, len(per_server)))))
    per_token = model.tpot(batch) / batch
    return max(
        (s["prompt_tokens"] - s["cached_tokens"]) / model.prefill_tokens_per_s + s["completion_tokens"] * per_token
        for s in per_server
    )


def llm_window(log_dir: Path | None, start: float, end: float, compression: float) -> float | None:
    """Real seconds from the first request to the last reply the servers logged between ``start``
    and ``end`` (``time.monotonic``, shared by the processes of one machine): the stage's LLM phase."""
    if log_dir is None:
        return None
    first, last = None, None
    for path in sorted(log_dir.glob("server-*.jsonl")):
        with path.open("rb") as handle:
            for line in handle:
                row = json.loads(line)
                if row.get("status") != 200 or not start <= row["t"] <= end:
                    continue
                first = row["t"] if first is None else min(first, row["t"])
                done = row["t"] + row["v"] / compression
                last = done if last is None else max(last, done)
    return None if first is None else last - first


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


@dataclass
class StageRun:
    """What one run of a stage cost and produced."""

    stage: str
    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    servers: list[dict[str, float]] = field(default_factory=list)
    killed_at_calls: int | None = None
    split: dict[str, Any] | None = None  # benchmarks/scale/cpu_split.py's figures (``split=True``)
    started: float = 0.0  # time.monotonic() at start and end
    ended: float = 0.0
    log: str = ""

    @property
    def calls(self) -> int:
        return int(sum(s["answered"] for s in self.servers))

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "returncode": self.returncode,
            "wall_s": round(self.wall_s, 2),
            "cpu_s": round(self.cpu_s, 2),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "calls": self.calls,
            "cpu_ms_per_call": round(1000 * self.cpu_s / self.calls, 3) if self.calls else None,
            "killed_at_calls": self.killed_at_calls,
            "servers": self.servers,
            **({"cpu_split": split_per_call(self.split, self.cpu_s, self.calls)} if self.split else {}),
        }


def run_stage(
    project: Path,
    stage: str,
    *,
    urls: list[str],
    args: list[str] | None = None,
    kill_after_calls: int | None = None,
    log_path: Path | None = None,
    split: bool = False,
) -> StageRun:
    """``python -m stages.<stage> --params params.yaml [args]`` in ``project``, measured (module
    docstring); ``kill_after_calls``: SIGKILL it once the servers answered that many of its calls;
    ``split``: run it under :mod:`benchmarks.scale.cpu_split` (its CPU by component)."""
    before = server_stats(urls) if urls else []
    log_path = log_path or project / "logs" / f"{stage}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start, started = time.perf_counter(), time.monotonic()
    with log_path.open("w") as log:
        command = [sys.executable, "-m", f"stages.{stage}", "--params", "params.yaml", *(args or [])]
        split_path = log_path.with_suffix(".cpu_split.json")
        split_path.unlink(missing_ok=True)
        if split:
            command[1:3] = ["-m", "benchmarks.scale.cpu_split", "--out", str(split_path), f"stages.{stage}"]
        process = subprocess.Popen(command, cwd=project, env=stage_env(), stdout=log, stderr=subprocess.STDOUT)
        killed = None
        if kill_after_calls is not None:
            first = sum(s["counts"]["answered"] for s in before)
            while process.poll() is None:
                done = answered(urls) - first
                if done >= kill_after_calls:
                    os.kill(process.pid, signal.SIGKILL)
                    killed = done
                    break
                time.sleep(0.2)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    returncode = os.waitstatus_to_exitcode(status)
    process.returncode = returncode
    after = server_stats(urls) if urls else []
    return StageRun(
        stage=stage,
        returncode=returncode,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,
        servers=_delta(after, before) if urls else [],
        killed_at_calls=killed,
        started=started,
        ended=time.monotonic(),
        log=log_path.read_text(errors="replace")[-3000:],
        split=json.loads(split_path.read_text()) if split and split_path.exists() else None,
    )


def split_per_call(split: dict[str, Any], cpu_s: float, calls: int) -> dict[str, Any]:
    """The stage's CPU per LLM call (ms) by component, from :mod:`benchmarks.scale.cpu_split`'s
    figures and the process's total (``os.wait4``): ``startup`` (up to the first call, baselines
    apart), the calls phase's ``embedding``, ``store``, ``runtime``, ``team``, ``other_threads``
    (not Python's), ``children`` (processes the stage ran and reaped: tagging's sandboxed programs),
    ``exit`` (after the stage returned: the interpreter's teardown), whose sum is
    ``total``; ``baselines`` (tagging's non-LLM systems' training) is reported apart, with
    ``total_with_baselines`` the whole process per call."""
    per = 1000.0 / max(1, calls)
    phase = split["calls"]["components"]
    baselines = split["startup"]["components"]["baselines"] + phase["baselines"]
    # the calls phase's components are the Python threads'; the rest of its CPU is other threads'
    other_in_calls = max(0.0, split["calls"]["cpu_s"] - sum(phase.values()))
    row = {
        "startup": split["startup"]["cpu_s"] - split["startup"]["components"]["baselines"],
        **{k: phase[k] for k in ("embedding", "store", "runtime", "team")},
        "other_threads": other_in_calls,
        "children": split.get("children_cpu_s", 0.0),
        "exit": max(0.0, cpu_s - split["process_cpu_s"] - split.get("children_cpu_s", 0.0)),
    }
    out = {k: round(v * per, 3) for k, v in row.items()}
    out["total"] = round((cpu_s - baselines) * per, 3)
    out["baselines_s"] = round(baselines, 2)
    out["total_with_baselines"] = round(cpu_s * per, 3)
    out["startup_embedding_s"] = round(split["startup"]["components"]["embedding"], 2)
    out["startup_s"] = round(row["startup"], 2)
    out["other_thread_names"] = {k: round(v, 2) for k, v in split["other_threads"].items()}
    return out


def items_of(project: Path, team: str) -> int:
    """Samples the team's stage wrote (one predictions line each)."""
    path = project / "data/generated" / OUTPUTS[team] / "predictions.jsonl"
    return sum(1 for _ in path.open()) if path.exists() else 0


def output_bytes(project: Path, team: str) -> dict[str, int]:
    generated = project / "data/generated" / OUTPUTS[team]
    traces = generated / "traces.jsonl"
    return {
        "traces": traces.stat().st_size if traces.exists() else 0,
        "outputs": folder_bytes(generated) - (traces.stat().st_size if traces.exists() else 0),
        "reports": folder_bytes(project / "reports" / f"generate_{team}"),
    }
