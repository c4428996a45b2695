"""A tiny fake team registered through the team interface (:mod:`pipelines.teams`) runs through the
generate stage body, as two shards, and ``merge_shards --team fake``; the merge gives one run's files.

The fake team squares the numbers ``0..items-1`` (no LLM): its prediction is the square, an even
number gives an SFT row, and the odd numbers are a counter that adds up over the shards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic import Field

from pipelines import teams
from pipelines.agents.generate_stage import run_generate_stage
from pipelines.agents.generation import GenerationConfig
from pipelines.agents.harness import GenerationOutputs, HarnessReport, System, run_systems
from pipelines.agents.runner import SampleTrace
from pipelines.agents.shards import roundtrip, write_manifest
from pipelines.agents.shortfalls import Shortfall, count_shortfall
from pipelines.agents.team_interface import Configs, Team
from pipelines.io import read_jsonl
from pipelines.llm.accounting import Accounting
from stages.merge_shards import main as merge
from tests.shard_checks import assert_same_outputs

GENERATED, REPORTS = Path("data/generated/fake"), Path("reports/generate_fake")


class FakeOutputs(GenerationOutputs):
    generated_dir: str = Field(str(GENERATED), description="predictions.jsonl, traces.jsonl, sft.jsonl")
    reports_dir: str = Field(str(REPORTS), description="metrics.json, usage.json, failures.json")


class FakeConfig(GenerationConfig):
    """The ``fake`` section: strict like every team's, with outputs, shard and the harness options."""

    ROLES: ClassVar[tuple[str, ...]] = ()
    outputs: FakeOutputs = FakeOutputs()
    items: int = Field(5, ge=1, description="numbers squared: 0..items-1")


async def square(number: int, trace: SampleTrace) -> int:
    trace.add_result("squarer", "square", result=number * number)
    return number * number


def sft_rows(number: int, results: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": f"n{number}", "answer": results["square"]}] if number % 2 == 0 else []


class FakeTeam(Team):
    name, stage = "fake", "generate_fake"
    sections = {"fake": FakeConfig}

    async def generate_async(self, cfgs: Configs, *, root=".", runtime=None, **options: Any) -> dict[str, Any]:
        cfg = cfgs["fake"]
        outputs = cfg.shard.outputs(cfg.outputs, root)
        report = await run_systems(
            list(range(cfg.items)),
            [System("square", square)],
            accounting=Accounting(),
            outputs=outputs,
            sample_id=lambda n: f"n{n}",
            prediction_row=lambda n, predictions: {"id": f"n{n}", "predictions": predictions},
            exports={"sft.jsonl": sft_rows},
            desc="fake",
            shard=cfg.shard,
            **cfg.harness_options(),
        )
        context, counters = {"items": cfg.items}, {"odd": sum(p % 2 for p in report.positions)}
        metrics = self.finish(cfgs, outputs, report, context=roundtrip(context), counters=roundtrip(counters))
        fingerprint = self.fingerprint(cfgs)
        write_manifest(cfg.shard, outputs, report, fingerprint=fingerprint, context=context, counters=counters)
        return metrics

    def finish(
        self, cfgs: Configs, outputs: GenerationOutputs, report: HarnessReport, *, context: dict, counters: dict
    ) -> dict[str, Any]:
        rows = read_jsonl(Path(outputs.generated_dir) / "predictions.jsonl")
        return {
            "items": context["items"],
            "sum_of_squares": sum(row["predictions"]["square"] for row in rows),
            "odd": counters["odd"],
            "sft_rows": report.written["sft.jsonl"],
            "failed_samples": report.failed_samples,
        }

    def shortfalls(self, cfgs: Configs, metrics: dict[str, Any]) -> list[Shortfall | None]:
        return [count_shortfall("numbers giving an SFT row", metrics["items"], metrics["sft_rows"], cause="odd")]

    def summary(self, metrics: dict[str, Any]) -> str:
        return f"{metrics['items']} numbers, sum of squares {metrics['sum_of_squares']}"


FAKE = FakeTeam()


@pytest.fixture
def registered(monkeypatch):
    """The fake team registered, for this test only."""
    monkeypatch.setattr(teams, "_REGISTRY", dict(teams._REGISTRY))
    return teams.register(FAKE)


def write_params(folder: Path) -> Path:
    params = folder / "params.yaml"
    section = {"items": 5, "progress": False, "llm": {"default": {"kind": "scripted", "replies": "unused.jsonl"}}}
    params.write_text(yaml.safe_dump({"fake": section}), encoding="utf-8")
    return params


def test_a_fake_team_runs_through_generate_shards_and_merge(registered, tmp_path, monkeypatch):
    assert teams.get("fake") is FAKE and teams.names() == ["tagging", "kgc", "ram2c", "fake"]
    one, sharded = tmp_path / "one", tmp_path / "sharded"
    one.mkdir(), sharded.mkdir()
    monkeypatch.chdir(one)
    assert run_generate_stage(FAKE, ["--params", str(write_params(one))]) == 0
    monkeypatch.chdir(sharded)
    params = write_params(sharded)
    for shard in ("1/2", "0/2"):  # any order
        assert run_generate_stage(FAKE, ["--params", str(params), "--shard", shard]) == 0
    shard_rows = read_jsonl(sharded / GENERATED / "shards/1-of-2/predictions.jsonl")
    assert [row["id"] for row in shard_rows] == ["n1", "n3"]  # sample p belongs to shard p % 2
    assert merge(["--team", "fake", "--params", str(params)]) == 0

    assert_same_outputs(
        one / GENERATED, sharded / GENERATED, byte_identical={"predictions.jsonl", "sft.jsonl"}, traces={"traces.jsonl"}
    )
    assert_same_outputs(
        one / REPORTS, sharded / REPORTS, byte_identical={"metrics.json", "failures.json"}, run_state={"usage.json"}
    )
    rows = read_jsonl(sharded / GENERATED / "predictions.jsonl")
    assert rows == [{"id": f"n{n}", "predictions": {"square": n * n}} for n in range(5)]
    assert read_jsonl(sharded / GENERATED / "sft.jsonl") == [{"id": f"n{n}", "answer": n * n} for n in (0, 2, 4)]
    metrics = json.loads((sharded / REPORTS / "metrics.json").read_text(encoding="utf-8"))
    assert metrics == {
        "items": 5,
        "sum_of_squares": 30,
        "odd": 2,
        "sft_rows": 3,
        "failed_samples": 0,
        "shortfalls": [{"what": "numbers giving an SFT row", "requested": 5, "produced": 3, "cause": "odd"}],
    }


def test_merge_refuses_shards_of_other_params(registered, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path)
    for shard in ("0/2", "1/2"):
        assert run_generate_stage(FAKE, ["--params", str(params), "--shard", shard]) == 0
    params.write_text(params.read_text(encoding="utf-8").replace("items: 5", "items: 6"), encoding="utf-8")
    assert merge(["--team", "fake", "--params", str(params)]) == 1
    assert "shard 0/2 ran with other params than the merge reads" in capsys.readouterr().err


def test_a_name_is_registered_once(registered):
    class Other(FakeTeam):
        pass

    with pytest.raises(ValueError, match="a team named 'fake' is registered already"):
        teams.register(Other())
    assert teams.register(FAKE) is FAKE  # the same team again is no change
    with pytest.raises(KeyError, match="no team 'fak' \\(did you mean 'fake'\\?\\)"):
        teams.get("fak")


def test_merge_offers_only_registered_teams(capsys):
    assert merge(["--team", "fake"]) == 2
    assert "invalid choice: 'fake' (choose from" in capsys.readouterr().err
