"""make_datasets on a malformed input row: one ``error:`` line naming file:line, exit code 1
(was a ValueError traceback), through the real stage entry."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_a_malformed_row_is_a_one_line_error(tmp_path):
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    section = params["make_datasets"]
    section["inputs"] = [{"path": "bad.jsonl", "kind": "sft"}]
    section["contamination"]["enabled"] = False
    section["output_dir"] = "out"
    for kind in ("sft", "dpo"):
        params["train"][kind] |= {"dataset": f"out/{kind}", "data_card": "out/data_card.json"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    (tmp_path / "bad.jsonl").write_text('{"messages": []}\n{"messages": [}\n', encoding="utf-8")
    env = os.environ | {"PYTHONPATH": str(ROOT), "EDUMAS_TRACKING": "0"}
    done = subprocess.run([sys.executable, "-m", "stages.make_datasets"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: bad.jsonl:2: not valid JSON (Expecting value at column 15); fix or remove the line")
    assert not (tmp_path / "out").exists()
