"""Tagging on the runtime's per-role sampling and the request cache (issue 11, defects 8 and 9).

8: the paper runs the numerical judge at its own (higher) temperature: ``llm.roles.numerical_judge.sampling``
must reach the arg extractor and the program writer, and only them.
9: a run resumed from the request cache reports the same usage as the run that made the calls.
"""

from pathlib import Path

import pytest

from pipelines.llm.client import LLMRuntime, backend_key
from pipelines.llm.scripted import ScriptedBackend
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from tests.tagging.scripted import team_rules

ROOT = Path(__file__).resolve().parents[2]
AGENT_OF = {
    "task planner": "planner",
    "question solver": "solver",
    "semantic judge": "semantic_judge",
    "First step: extract": "arg_extractor",
    "Second step: write": "program_writer",
    "expert math teacher": "single_llm",
}


class Killed(BaseException):
    """The stage killed halfway (like SIGINT: not an Exception, so nothing catches it)."""


class RecordingBackend(ScriptedBackend):
    """Scripted replies; remembers the temperature each agent was called with; ``kill_after``
    calls, the next one kills the run."""

    def __init__(self, kill_after: int | None = None):
        super().__init__(team_rules(), identity="scripted-roles")
        self.temperatures: dict[str, set[float]] = {}
        self.kill_after = kill_after

    async def chat(self, messages, params):
        if self.kill_after is not None and len(self.calls) >= self.kill_after:
            raise Killed()
        agent = next(a for key, a in AGENT_OF.items() if key in messages[0]["content"])
        self.temperatures.setdefault(agent, set()).add(params.temperature)
        return await super().chat(messages, params)


def config(tmp_path: Path, **llm) -> TaggingConfig:
    return TaggingConfig.model_validate(
        {
            "data": {"path": str(ROOT / "data/tagging/demo.jsonl"), "languages": ["en"], "limit": 4},
            "split": {"generation_limit": 2},
            "systems": ["team", "single_llm"],
            "output_mode": "text",
            "progress": False,
            "llm": {
                "default": {"kind": "scripted", "replies": "unused.jsonl", "model": "scripted-roles"},
                "sampling": {"temperature": 0.0, "max_tokens": 64},
                "cache": None,
                **llm,
            },
            "outputs": {"generated_dir": str(tmp_path / "generated"), "reports_dir": str(tmp_path / "reports")},
        }
    )


def run(cfg: TaggingConfig, backend) -> dict:
    runtime = LLMRuntime(cfg.llm, backends={backend_key(cfg.llm.default): backend})
    return generate_tagging(cfg, root=ROOT, runtime=runtime)


def test_numerical_judge_runs_on_its_own_sampling(tmp_path):
    cfg = config(tmp_path, roles={"numerical_judge": {"sampling": {"temperature": 0.7}}})
    backend = RecordingBackend()
    run(cfg, backend)
    assert backend.temperatures["arg_extractor"] == {0.7}
    assert backend.temperatures["program_writer"] == {0.7}
    for agent in ("planner", "solver", "semantic_judge", "single_llm"):
        assert backend.temperatures[agent] == {0.0}, agent


def test_a_resumed_run_reports_the_usage_of_the_run_that_made_the_calls(tmp_path):
    cfg = config(tmp_path, cache=str(tmp_path / "cache.sqlite"))
    first = run(cfg, RecordingBackend())
    again = run(cfg, RecordingBackend())  # every call from the request cache
    for system in ("team", "single_llm"):
        assert again["systems"][system]["tokens_per_question"] == pytest.approx(
            first["systems"][system]["tokens_per_question"]
        )
        assert again["systems"][system]["llm_calls_per_question"] == first["systems"][system]["llm_calls_per_question"]
    # killed halfway, then run again on the same cache: the same predictions and the same usage
    killed = config(tmp_path / "killed", cache=str(tmp_path / "killed.sqlite"))
    with pytest.raises(Killed):
        run(killed, RecordingBackend(kill_after=15))
    resumed = run(killed, RecordingBackend())
    for system in ("team", "single_llm"):
        assert resumed["systems"][system]["overall"] == first["systems"][system]["overall"]
        assert resumed["systems"][system]["tokens_per_question"] == pytest.approx(
            first["systems"][system]["tokens_per_question"]
        )
