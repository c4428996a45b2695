"""Tracking: secrets never reach W&B; one offline run per stage with job_type and group."""

import json
import time

import pytest

from pipelines.tracking import REDACTED, scrub, stage_run, wandb_mode


def test_scrub_redacts_secret_keys_and_env_values(monkeypatch):
    monkeypatch.setenv("GLM_API_KEY", "sk-very-secret-value")
    params = {
        "llm": {"api_key": "abc", "api_key_env": "GLM_API_KEY", "base_urls": ["http://x/?k=sk-very-secret-value"]},
        "token": 5,
        "lr": 0.1,
    }
    clean = scrub(params)
    assert clean["llm"]["api_key"] == REDACTED
    assert clean["llm"]["api_key_env"] == "GLM_API_KEY"  # the variable's name is not a secret
    assert "sk-very-secret-value" not in json.dumps(clean)
    assert clean["token"] == REDACTED and clean["lr"] == 0.1


def test_mode_is_offline_unless_configured(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert wandb_mode() == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert wandb_mode() == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_mode() == "disabled"


@pytest.mark.slow
def test_offline_stage_run_logs_params_and_metrics_without_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("EDUMAS_TRACKING", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("DVC_EXP_NAME", "exp-demo")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-never-be-logged")
    with stage_run("unit_stage", {"model": "m", "api_key": "sk-must-never-be-logged"}) as run:
        assert run.run is not None
        assert run.run.job_type == "unit_stage" and run.run.group == "exp-demo"
        assert run.run.config["api_key"] == REDACTED
        run.log_metrics({"quality": {"f1": 0.5}, "note": "text is skipped"})
        assert run.run.summary["quality/f1"] == 0.5
    # wandb-core may still be flushing the offline run file after finish() under load: wait for it
    deadline = time.monotonic() + 60
    while True:
        logged = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
        if b"unit_stage" in logged or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert b"sk-must-never-be-logged" not in logged
    assert b"unit_stage" in logged


def _repro(project, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    dvc = str(Path(sys.executable).parent / "dvc")
    env = {k: v for k, v in os.environ.items() if k not in ("DVC_STAGE", "DVC_EXP_NAME")}
    env |= {"PYTHONPATH": str(root), "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run([dvc, "repro", "--force"], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [(project / f"{name}.txt").read_text().strip() for name in ("a", "b")]


def test_a_plain_dvc_repro_groups_its_stages(tmp_path):
    """Every stage of one real `dvc repro` gets one group; the next repro another; outside DVC none."""
    import subprocess
    import sys
    from pathlib import Path

    from pipelines.tracking import dvc_repro_group

    project = tmp_path / "repo"
    project.mkdir()
    subprocess.run([str(Path(sys.executable).parent / "dvc"), "init", "--no-scm", "-q"], cwd=project, check=True)
    show = f"{sys.executable} -c \"from pipelines.tracking import dvc_repro_group; print(dvc_repro_group())\""
    (project / "dvc.yaml").write_text(
        f"stages:\n  a:\n    cmd: {show} > a.txt\n    outs: [a.txt]\n"
        f"  b:\n    cmd: {show} > b.txt\n    deps: [a.txt]\n    outs: [b.txt]\n"
    )
    first = _repro(project, tmp_path)
    second = _repro(project, tmp_path)
    assert first[0] == first[1] and first[0].startswith("repro-") and first[0] != "None"
    assert second[0] == second[1] != first[0]
    assert dvc_repro_group({}) is None  # not under DVC
