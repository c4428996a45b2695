"""The recorded team output (tests/evaluation/recorded) still has the shape the teams write today:
each team runs here on its scripted backend, and every (agent, role) it shares with the recording
must carry the same fields the report and the trace browser read, with a parsed result of the
same kind. A failure means a team's output changed: re-record with
``PYTHONPATH=$PWD python -m tests.evaluation.recorded.record`` (and adapt the readers)."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.llm.client import LLMRuntime, backend_key
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from stages.generate_kgc import main as generate_kgc
from tests.evaluation.recorded import records, traces

READ = {  # the row fields the trace views and the outcome read
    "sample_id", "agent", "role", "prompt", "reply", "parsed", "ok", "error", "usage", "calls", "code", "sandbox",
    "round", "expert", "kept", "group", "turn", "outcome", "label", "documents", "document", "system",
}  # fmt: skip


def _kind(value) -> str:
    if isinstance(value, dict):
        return "dict:" + ",".join(sorted(value))
    return type(value).__name__


def signature(rows) -> dict[tuple[str, str], tuple[frozenset, str]]:
    found: dict[tuple[str, str], tuple[frozenset, str]] = {}
    for row in rows:
        if row.get("ok") is False:
            continue  # a failed step has no parsed result to compare
        found.setdefault((row["agent"], row["role"]), (frozenset(READ & set(row)), _kind(row.get("parsed"))))
    return found


def _same(recorded, current) -> None:
    shared = set(recorded) & set(current)
    assert shared, (sorted(recorded), sorted(current))
    for key in sorted(shared):
        assert recorded[key] == current[key], f"{key}: recorded {recorded[key]}, written now {current[key]}"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_tagging_rows(tmp_path):
    from tests.tagging.regression.scenario import backend, config_data

    cfg = TaggingConfig.model_validate({**config_data(tmp_path), "systems": ["team", "single_llm"]})
    runtime = LLMRuntime(cfg.llm, backends={backend_key(cfg.llm.default): backend()})
    generate_tagging(cfg, root=tmp_path, runtime=runtime)
    _same(signature(traces("tagging")), signature(_jsonl(tmp_path / "generated/traces.jsonl")))
    written = _jsonl(tmp_path / "generated/predictions.jsonl")[0]
    assert set(written) == set(next(iter(records("tagging").values())))


def test_kgc_rows(tmp_path, monkeypatch):
    from tests.kgc.test_stage import write_params

    monkeypatch.chdir(tmp_path)
    assert generate_kgc(["--params", str(write_params(tmp_path, systems="[cooperkgc]"))]) == 0
    generated = tmp_path / "data/generated/kgc"
    _same(signature(traces("kgc")), signature(_jsonl(generated / "traces.jsonl")))
    assert set(_jsonl(generated / "predictions.jsonl")[0]) == set(next(iter(records("kgc").values())))


def test_ram2c_rows(tmp_path):
    from tests.ram2c.test_shards import run, write_params

    _, cfg, build, retrieval = write_params(tmp_path)
    run(tmp_path, cfg.model_copy(update={"experts_per_group": 1, "dialogues": 2}), build, retrieval)
    generated = tmp_path / "data/generated/ram2c"
    _same(signature(traces("ram2c")), signature(_jsonl(generated / "traces.jsonl")))
    _same(signature(traces("ram2c_topics")), signature(_jsonl(generated / "topics/traces.jsonl")))
    # "ballots" (each voter role's ballots, for the voters' validity) is newer than the recording
    assert set(_jsonl(generated / "predictions.jsonl")[0]) == set(next(iter(records("ram2c").values()))) | {"ballots"}
