"""One environment: the GPU extra resolves on top of the CPU install without replacing its core."""

import json
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "numpy")


def pinned() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {d.split("==")[0].lower(): d.split("==")[1] for d in deps if "==" in d}


def test_installed_versions_match_the_pins():
    pins = pinned()
    for name in CORE:
        assert version(name).split("+")[0] == pins[name], f"{name}: installed {version(name)}, pinned {pins[name]}"


@pytest.mark.slow
def test_gpu_extra_resolves_without_replacing_core_packages(tmp_path):
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), f"{ROOT}[gpu,dev]"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0 and ("NewConnectionError" in proc.stderr or "No matching distribution" in proc.stderr):
        pytest.skip(f"package index not reachable: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    items = json.loads(report.read_text())["install"]
    installs = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in items}
    assert "vllm" in installs and "bitsandbytes" in installs
    for name in CORE:
        assert name not in installs, f"the gpu extra would replace {name} with {installs.get(name)}"
