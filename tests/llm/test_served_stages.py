"""generate_tagging and generate_kgc against a real third-party server: `transformers serve` on the
offline SmolLM2-135M-Instruct (issue 36.10), in text mode (the server ignores response_format), with
small limits. The model name is the folder the server was started with; its /v1/models answers
HTTP 500 (an empty Hugging Face cache), which is a warning, and the chat check accepts the name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.llm.test_openai_compat_server import _serve_available, serving
from tests.test_end_to_end import _project_copy
from tests.tiny_models import smollm2_dir

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smollm2_server(tmp_path_factory):
    """(base_url, model name) of `transformers serve` pinned to the converted SmolLM2 folder."""
    if not _serve_available():
        pytest.skip("transformers serve needs its serving extras: pip install fastapi uvicorn openai")
    model = str(smollm2_dir())
    argv = [str(Path(sys.executable).parent / "transformers"), "serve", model]
    with serving(argv, tmp_path_factory.mktemp("serve")) as url:
        yield url, model


def _project(folder: Path, base_url: str, model: str) -> Path:
    """A project copy whose params run every role on the server, text mode, a few short calls."""
    _project_copy(folder)
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["llm"]["default"] = {
        "kind": "openai", "model": model, "base_urls": [base_url], "api_key_env": None,
        "timeout_s": 600.0, "max_retries": 1,
    }
    params["llm"]["cache"] = None
    tagging = params["tagging"]
    tagging.update(output_mode="text", systems=["single_llm"], concurrency=1, max_unparseable_share=1.0)
    tagging["data"]["limit"] = 1
    tagging["llm"]["sampling"] = tagging["llm"].get("sampling") or {}
    tagging["llm"]["sampling"]["max_tokens"] = 8
    kgc = params["kgc"]
    kgc.update(output_mode="text", systems=["autokg"], concurrency=1, max_unparseable_share=1.0)
    kgc["datasets"] = [d | ({"sample": 1} if d["name"] == "conllpp" else {"evaluate": False}) for d in kgc["datasets"]]
    kgc["llm"]["sampling"]["max_tokens"] = 8
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return folder


@pytest.mark.parametrize("stage", ["generate_tagging", "generate_kgc"])
def test_a_generate_stage_runs_against_transformers_serve(smollm2_server, stage, tmp_path):
    base_url, model = smollm2_server
    project = _project(tmp_path / "edumas", base_url, model)
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "EDUMAS_TRACKING": "0",
                        "WANDB_MODE": "disabled", "PYTHONPATH": str(project)}
    done = subprocess.run([sys.executable, "-m", f"stages.{stage}"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "model name not checked" in done.stderr  # its /v1/models answered HTTP 500
    team = "tagging" if stage == "generate_tagging" else "kgc"
    predictions = (project / "data/generated" / team / "predictions.jsonl").read_text().splitlines()
    assert len(predictions) >= 1
