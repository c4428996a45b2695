"""Queued ablations see what a workspace run sees: the request cache and the knowledge bases are
copied into DVC's temporary copy (-C), ../shared is linked beside the copies, and a queued run
that lacks any of them stops with an error naming the fix. Unit checks, then a real DVC queue (a
celery worker, `dvc exp run --run-all`) on a toy project whose stage reads all three."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipelines import workspace
from pipelines.evaluation.ablation import estimate
from pipelines.evaluation.ablation.experiments import choose, main
from pipelines.evaluation.ablation.tables import experiments

BIN = Path(sys.executable).parent


def _workspace(root: Path) -> Path:
    """A project folder with a request cache and a knowledge base, and ../shared beside it."""
    project = root / "project"
    for folder in ("data/cache", "data/kb"):
        (project / folder).mkdir(parents=True)
    (project / "data/cache/llm.sqlite").write_text("cache", encoding="utf-8")
    (project / "data/kb/chroma.sqlite3").write_text("store", encoding="utf-8")
    (root / "shared/data").mkdir(parents=True)
    (root / "shared/data/text.txt").write_text("the public text", encoding="utf-8")
    return project


def test_copy_paths_and_the_shared_link(tmp_path):
    from dvc.repo.experiments.utils import EXEC_TMP_DIR

    assert workspace.EXEC_TMP_DIR == EXEC_TMP_DIR  # where DVC makes the queued copies
    project = _workspace(tmp_path)
    assert workspace.copy_flags(project) == ["-C", "data/cache", "-C", "data/kb"]
    links = workspace.link_shared(project)
    assert [p.relative_to(project).as_posix() for p in links] == [".dvc/tmp/exps/shared",
                                                                  ".dvc/tmp/exps/standalone/shared"]  # fmt: skip
    copy = project / ".dvc/tmp/exps/tmpabc"  # where DVC makes a queued copy: ../shared is the link
    copy.mkdir()
    assert (copy / "../shared/data/text.txt").read_text(encoding="utf-8") == "the public text"
    assert workspace.link_shared(project) == links  # idempotent
    assert workspace.link_shared(tmp_path / "shared/data") == []  # no ../shared beside it: nothing to link


def test_a_queued_copy_without_the_workspace_inputs_stops(tmp_path, monkeypatch):
    project = _workspace(tmp_path)
    copy = project / ".dvc/tmp/exps/tmpabc"
    copy.mkdir(parents=True)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    workspace.check_queued_run(copy)  # not inside a DVC experiment: nothing to check
    monkeypatch.setenv("DVC_ROOT", str(project))
    workspace.check_queued_run(project)  # a workspace run (DVC_ROOT is the project itself)
    with pytest.raises(workspace.QueuedRunError) as error:
        workspace.check_queued_run(copy)
    message = str(error.value)
    assert "lacks data/cache, data/kb, ../shared of the workspace" in message
    assert "-C data/cache -C data/kb" in message and "experiments link" in message
    for folder in ("data/cache", "data/kb"):
        (copy / folder).mkdir(parents=True)
    workspace.link_shared(project)
    workspace.check_queued_run(copy)  # everything there now


def test_the_estimate_adds_the_stages_an_ablation_reruns(tmp_path):
    timings = tmp_path / "reports/timings"
    timings.mkdir(parents=True)
    for stage, seconds in (("generate_kgc", 300), ("make_datasets", 30), ("train@sft", 60), ("train@dpo", 60),
                           ("evaluate", 420), ("report", 10), ("generate_tagging", 200)):  # fmt: skip
        (timings / f"{stage}.json").write_text(json.dumps({"stage": stage, "wall_s": seconds}), encoding="utf-8")
    (timings / "broken.json").write_text("{", encoding="utf-8")
    found = estimate.estimate(choose("kgc-rounds-0,tagging-team-only"), root=tmp_path, jobs=2)
    assert [(r["name"], r["seconds"]) for r in found["rows"]] == [("kgc-rounds-0", 880.0),
                                                                  ("tagging-team-only", 780.0)]  # fmt: skip
    assert found["total_s"] == 830.0 and found["untimed"] == []
    text = estimate.describe(found)
    assert "kgc-rounds-0: about 15 min (generate_kgc 5 min, make_datasets 30 s" in text
    assert text.endswith("the set: about 14 min for 2 experiments")


TOY_STAGE = textwrap.dedent(
    """
    import json, pathlib, yaml
    from pipelines.workspace import check_queued_run
    check_queued_run()
    rounds = yaml.safe_load(open("params.yaml"))["kgc"]["team"]["rounds"]
    read = lambda p: pathlib.Path(p).read_text() if pathlib.Path(p).exists() else "missing"
    out = {"rounds": rounds, "shared": read("../shared/data/text.txt"), "cache": read("data/cache/llm.sqlite"),
           "kb": read("data/kb/chroma.sqlite3")}
    pathlib.Path("reports/generate_kgc").mkdir(parents=True, exist_ok=True)
    json.dump({"sft_rows": rounds, "seen": sum(v != "missing" for k, v in out.items() if k != "rounds")},
              open("reports/generate_kgc/metrics.json", "w"))
    """
)


@pytest.mark.slow
def test_a_real_queue_sees_the_workspace_inputs_or_fails(tmp_path, monkeypatch):
    project = _workspace(tmp_path)
    (project / "stage.py").write_text(TOY_STAGE, encoding="utf-8")
    (project / "params.yaml").write_text("kgc:\n  team:\n    rounds: 1\n", encoding="utf-8")
    (project / "dvc.yaml").write_text(textwrap.dedent("""
        stages:
          generate_kgc:
            cmd: python stage.py
            deps: [stage.py]
            params: [kgc]
            metrics:
              - reports/generate_kgc/metrics.json:
                  cache: false
        """), encoding="utf-8")  # fmt: skip
    (project / ".gitignore").write_text("/data/\n", encoding="utf-8")
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")  # `dvc` of main()'s commands
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[3]))
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    env = dict(os.environ)
    git = ["git", "-c", "user.name=edumas-test", "-c", "user.email=test@edumas.invalid"]

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), cwd=project, env=env, capture_output=True, text=True, timeout=600)

    for command in ([*git, "init", "-q"], [str(BIN / "dvc"), "init", "-q"], [str(BIN / "dvc"), "repro", "-q"],
                    [*git, "add", "-A"], [*git, "commit", "-qm", "baseline"]):  # fmt: skip
        assert run(*command).returncode == 0, command
    # by hand, without -C: the queued copy lacks the cache, the knowledge base and ../shared, and says so
    assert run(str(BIN / "dvc"), "exp", "run", "--queue", "-n", "bare", "-S", "kgc.team.rounds=2").returncode == 0
    monkeypatch.chdir(project)
    assert main(["queue", "--only", "kgc-rounds-0"]) == 0  # with -C data/cache -C data/kb
    assert main(["run"]) == 0  # links ../shared, then dvc exp run --run-all
    shown = json.loads(run(str(BIN / "dvc"), "exp", "show", "--json").stdout)
    found = {e["name"]: e for e in experiments(shown)}
    assert found["kgc-rounds-0"]["metrics"]["reports/generate_kgc/metrics.json"] == {"sft_rows": 0, "seen": 3}
    assert "bare" not in found  # it failed
    log = run(str(BIN / "dvc"), "queue", "logs", "bare")
    assert "lacks data/cache, data/kb of the workspace" in log.stdout + log.stderr  # ../shared: linked by run
