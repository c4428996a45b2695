"""A team's stage in batch mode against the simulated servers' batch API: the same outputs as online,
and a stage killed (SIGKILL) while its batches run re-attaches on rerun, submitting no line twice
(counted from the server's request log)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.support.simserver import SimCluster

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data/kgc"


def write_params(workdir: Path, urls: list[str], *, mode: str) -> Path:
    """The KGC stage of tests/scale/test_simserver_http.py (2 sentences per dataset, one round)."""
    batch = ", mode: batch, batch: {poll_interval_s: 0.05, settle_s: 0.02}" if mode == "batch" else ""
    workdir.mkdir(parents=True, exist_ok=True)
    params = workdir / "params.yaml"
    params.write_text(
        textwrap.dedent(f"""\
        kgc:
          datasets:
            - {{name: conllpp, format: conll, files: [{DEMO / "ner_en.conll"}], sample: 2}}
            - {{name: duie2, format: duie, files: [{DEMO / "re_zh.duie.jsonl"}], sample: 2}}
            - {{name: duee1, format: duee, files: [{DEMO / "ee_zh.duee.jsonl"}],
               schema_file: {DEMO / "ee_zh.duee_schema.jsonl"}, sample: 2}}
          systems: [cooperkgc, chatie]
          output_mode: json
          spans: sentence
          concurrency: 256
          progress: false
          llm:
            default: {{kind: openai, model: qwen, base_urls: {json.dumps(urls)}, api_key_env: null{batch}}}
            cache: llm.sqlite
            sampling: {{max_tokens: 512}}
          team: {{rounds: 1}}
        """)
    )
    return params


def run_stage(workdir: Path, params: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "stages.generate_kgc", "--params", str(params)]
    return subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]


def outputs(workdir: Path) -> tuple[list[dict], list[tuple]]:
    generated = workdir / "data/generated/kgc"
    predictions = [json.loads(line) for line in (generated / "predictions.jsonl").read_text().splitlines()]
    traces = [json.loads(line) for line in (generated / "traces.jsonl").read_text().splitlines()]
    replies = sorted((t["system"], t["sample_id"], t["agent"], t["reply"]) for t in traces if t.get("prompt"))
    return predictions, replies


def submitted(log_dir: Path) -> list[str]:
    rows = [json.loads(line) for line in (log_dir / "server-0.jsonl").read_text().splitlines()]
    return [r["custom_id"] for r in rows if r.get("kind") == "batch_item"]


def journal_batches(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM batches").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_batch_mode_gives_the_online_outputs_and_survives_a_kill(tmp_path):
    with SimCluster(servers=1, compression=100, served_model_name=["qwen"]) as cluster:
        online = tmp_path / "online"
        finish(run_stage(online, write_params(online, cluster.urls, mode="online")))
    expected = outputs(online)
    assert len(expected[1]) > 0 and expected[0]

    logs = tmp_path / "batch-logs"
    with SimCluster(servers=1, compression=100, served_model_name=["qwen"], log_dir=logs, batch_delay_s=0.3) as cluster:
        whole = tmp_path / "batch"
        finish(run_stage(whole, write_params(whole, cluster.urls, mode="batch")))
    waves = cluster.stats[0]["counts"]["batches"]
    assert outputs(whole) == expected
    assert cluster.stats[0]["counts"]["answered"] == 0  # nothing went online
    assert len(submitted(logs)) == len(set(submitted(logs))) == cluster.stats[0]["counts"]["batch_items"]

    logs = tmp_path / "kill-logs"
    with SimCluster(servers=1, compression=100, served_model_name=["qwen"], log_dir=logs, batch_delay_s=1.5) as cluster:
        killed = tmp_path / "killed"
        params = write_params(killed, cluster.urls, mode="batch")
        process = run_stage(killed, params)
        deadline = time.monotonic() + 120
        while journal_batches(killed / "llm.batches.sqlite") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the second wave's batch waits on the server
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        assert journal_batches(killed / "llm.batches.sqlite") == 2
        finish(run_stage(killed, params))
    ids = submitted(logs)
    assert outputs(killed) == expected
    assert len(ids) == len(set(ids))  # across the kill and the rerun no line was submitted twice
    assert cluster.stats[0]["counts"]["batches"] == waves  # the rerun re-attached to the open wave
