"""The whole pipeline as a new user runs it: ``dvc repro`` in a fresh copy of the project (no
``../shared``), on the offline models, with the smoke profile (configs/profiles/smoke.yaml) laid
over params.yaml. Every stage must run and hand real rows to the next; a second ``dvc repro``
must find nothing to do; two queued ablations of the set (the cheapest two on this profile: every
LLM call they make is in the copied request cache) run in DVC's temporary copies and their tables
appear in the summary; a ``dvc exp run -S`` variant reruns only the stages its parameter feeds,
and ``dvc exp show`` lists it beside the baseline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["prepare_models", "build_kb", "generate_tagging", "generate_kgc", "generate_ram2c", "make_datasets",
          "train@sft", "train@dpo", "evaluate", "report"]
ABLATIONS = ("kgc-rounds-0", "tagging-team-only")  # the two cheapest of the set on this profile


def _project_copy(target: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", EDUMAS_TRACKING="0", WANDB_MODE="disabled",
               DVC_NO_ANALYTICS="1", ANONYMIZED_TELEMETRY="False", EDUMAS_LOG_LEVEL="WARNING")
    return env


def _dvc(project: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "dvc"), *args], cwd=project, env=_env(),
                          capture_output=True, text=True, timeout=timeout)


def _rows(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


@pytest.mark.slow
@pytest.mark.first
def test_dvc_repro_of_the_smoke_profile(tmp_path: Path) -> None:
    project = tmp_path / "edumas"
    _project_copy(project)
    subprocess.run([sys.executable, "-m", "pipelines.profiles", "smoke", "--write", "params.yaml"],
                   cwd=project, env=_env(), check=True)
    git = ["git", "-c", "user.name=edumas-test", "-c", "user.email=test@edumas.invalid"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "smoke profile"]):
        subprocess.run([*git, *command], cwd=project, check=True, capture_output=True)

    first = _dvc(project, "repro", timeout=3600)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    for stage in STAGES:
        assert f"Running stage '{stage}'" in first.stdout, stage

    generated = project / "data" / "generated"
    assert _rows(generated / "tagging" / "predictions.jsonl") > 0
    assert _rows(generated / "kgc" / "predictions.jsonl") > 0
    assert _rows(generated / "ram2c" / "dialogues.jsonl") > 0
    # tagging's default JSON mode on the offline model: every agent's reply is constrained to its bounded schema and
    # capped at its longest reply, so even the 135M model's replies close and parse (en and zh); each numerical check
    # is a Python line the model wrote, run in the sandbox to a verdict (issue 21)
    tagging = json.loads((project / "reports" / "generate_tagging" / "metrics.json").read_text(encoding="utf-8"))
    counts = [c for s in ("team", "single_llm") for c in tagging["systems"][s]["unparseable"].values()]
    assert tagging["output_mode"] == "json" and counts, tagging
    assert all(c["replies"] > 0 and c["unparseable"] == 0 for c in counts), tagging["systems"]
    traces = [json.loads(t) for t in (generated / "tagging" / "traces.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {t["sample_id"].rsplit("-", 2)[1] for t in traces} == {"en", "zh"}
    replies = [t for t in traces if t["agent"] != "team" and t.get("reply") is not None]
    assert replies and all(t["ok"] and json.loads(t["reply"]) for t in replies)  # closed, complete JSON
    numerical = tagging["systems"]["team"]["numerical"]
    assert numerical["checks"] > 0 and numerical["checks"] == numerical["programs_run"] == numerical["verdicts"]
    programs = [t for t in traces if t["agent"] == "program_writer"]
    assert len(programs) == numerical["programs_run"]
    assert all(json.loads(t["reply"])["code"].startswith("print(") and t["sandbox"]["verdict"] is not None
               for t in programs)  # fmt: skip
    card = json.loads((project / "data" / "train" / "data_card.json").read_text(encoding="utf-8"))
    assert "data/generated/tagging/sft.jsonl" in json.dumps(card), "the generated rows are make_datasets inputs"
    for method in ("sft", "dpo"):
        assert (project / "models" / method / "final" / "adapter_config.json").exists(), method
        metrics = json.loads((project / "reports" / "train" / method / "metrics.json").read_text(encoding="utf-8"))
        assert metrics, method

    evaluation = json.loads((project / "reports" / "evaluate" / "metrics.json").read_text(encoding="utf-8"))
    assert {"tagging", "kgc", "tutoring", "deltas"} <= set(evaluation) and evaluation["offline_default"] is True
    assert evaluation["tagging"]["n"] == 2 and evaluation["deltas"]
    summary = (project / "reports" / "summary.md").read_text(encoding="utf-8")
    assert "Knowledge tagging" in summary and "Tuned vs base" in summary
    # RAM2C Tables 1-3 (the smoke profile's reference backend and team variants on the offline model), read back
    hts = evaluation["tutoring"]["hts"]["tables"]
    assert list(hts) == ["1", "2", "3"] and list(hts["3"]["rows"])[1:] == [
        f"ref-{variant} vs ref-R" for variant in ("P/R", "E/R", "PE/R", "R/1")
    ]
    for title in ("Table 1 layout", "Table 2 layout", "Table 3 layout"):
        assert f"### {title}" in summary, title
    assert "| ref vs ref-R |" in summary and "| ref-PE/R vs ref-R |" in summary and "n too small" in summary
    assert (project / "reports" / "traces.html").stat().st_size > 0

    second = _dvc(project, "repro", timeout=600)
    assert second.returncode == 0, second.stderr[-4000:]
    assert "Running stage" not in second.stdout, second.stdout[-4000:]

    for command in (["add", "-A"], ["commit", "-qm", "first run"]):
        subprocess.run([*git, *command], cwd=project, check=True, capture_output=True)
    timings = sorted(p.stem for p in (project / "reports" / "timings").glob("*.json"))
    assert timings == sorted(STAGES), timings  # every stage timed: the ablation estimate has them all

    ablations = subprocess.run(
        [sys.executable, "-m", "pipelines.evaluation.ablation.experiments", "all", "--only", ",".join(ABLATIONS)],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert ablations.returncode == 0, ablations.stdout[-4000:] + ablations.stderr[-4000:]
    out = ablations.stdout
    assert out.startswith("Time estimate (upper bound") and "not timed yet" not in out
    assert out.count("-C data/cache -C data/kb") == 2  # each queued copy gets the cache and the knowledge base
    summary = (project / "reports" / "summary.md").read_text(encoding="utf-8")
    tables = summary.split("## Ablations (dvc experiments)", 1)[1]
    kgc = tables.split("### CooperKGC ablations", 1)[1].split("###", 1)[0]
    assert re.search(r"^\| kgc-rounds-0 \| 0 \| ", kgc, re.M), kgc  # rounds 0, its F1 columns filled in
    tagging = tables.split("### Knowledge tagging: team vs single LLM", 1)[1].split("###", 1)[0]
    row = re.search(r"^\| tagging-team-only \| (.*)$", tagging, re.M)
    assert row and row.group(1).startswith('["team"] | ') and "RAM2C ablations" not in tables, tagging
    # its training data did not change: the queued copy restores the adapters from the cache, no training
    # (the checkpoints folder, absent from the copy, is not a DVC out)
    log = _dvc(project, "queue", "logs", "tagging-team-only", timeout=300).stdout
    assert "Running stage 'generate_tagging'" in log and "Stage 'make_datasets' didn't change" in log, log[-4000:]
    assert "Running stage 'train@" not in log, log[-4000:]
    for command in (["add", "-A"], ["commit", "-qm", "ablations"]):
        subprocess.run([*git, *command], cwd=project, check=True, capture_output=True)

    variant = _dvc(project, "exp", "run", "-n", "fewer-traces", "-S", "report.trace_limit=3", timeout=600)
    assert variant.returncode == 0, variant.stdout[-4000:] + variant.stderr[-4000:]
    assert "Running stage 'report'" in variant.stdout and "Running stage 'evaluate'" not in variant.stdout
    shown = _dvc(project, "exp", "show", "--json", timeout=300)
    assert shown.returncode == 0, shown.stderr[-4000:]
    from pipelines.evaluation.ablation.tables import experiments

    found = {e["name"]: e for e in experiments(json.loads(shown.stdout))}
    assert found["fewer-traces"]["params"]["report.trace_limit"] == 3
    baseline = next(e for e in found.values() if e["baseline"])
    assert baseline["params"]["report.trace_limit"] != 3
    ours, theirs = (e["metrics"]["reports/report/metrics.json"] for e in (found["fewer-traces"], baseline))
    for team in ("tagging", "kgc", "ram2c"):  # the variant's trace browser shows at most 3 samples per team
        shown, samples = ours[f"traces.{team}.shown"], theirs[f"traces.{team}.samples"]
        assert shown == min(3, samples) and theirs[f"traces.{team}.shown"] == min(200, samples), team
