"""The strict ``hts`` settings, the judges they build and one configured judging run."""

import asyncio

import pytest

from pipelines.config import ConfigError, validate_section
from pipelines.evaluation.hts.config import HTSConfig, build_judges, run_judging
from pipelines.evaluation.hts.judging import HTSItem
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.llm.types import SamplingParams


class FakeRuntime:
    """for_role like LLMRuntime's: one scripted backend per role, default sampling or ``params``."""

    def __init__(self, replies):
        self.backends = {r: ScriptedBackend([(r"Dimension", reply)], identity=r) for r, reply in replies.items()}

    def for_role(self, role, params=None):
        return LLM(self.backends[role], role=role, default_params=params or SamplingParams(max_tokens=64))


def test_config_is_strict_and_names_the_fix():
    judges = [{"name": "a", "seed": 1}, {"name": "b", "role": "gpt"}]
    cfg = validate_section({"judges": judges}, HTSConfig, section="hts")
    assert cfg.roles() == ["hts_judge", "gpt"] and cfg.dimensions == ["humanized", "teaching", "safety"]
    for bad, where in (
        ({"judges": [{"name": "a"}, {"name": "a"}]}, "distinct"),
        ({"judges": [{"name": "a", "sed": 1}]}, "hts.judges.0.sed"),
        ({"dimensions": ["humour"]}, "hts.dimensions.0"),
        ({"dimensions": ["safety", "safety"]}, "without repeats"),
        ({"resamples": 0}, "hts.resamples"),
        ({"mode": "xml"}, "hts.mode"),
    ):
        with pytest.raises(ConfigError, match=where):
            validate_section(bad, HTSConfig, section="hts")


def test_judges_get_their_role_and_sampling_overrides():
    runtime = FakeRuntime({"hts_judge": "Verdict: A", "gpt": "Verdict: B"})
    cfg = HTSConfig.model_validate(
        {"judges": [{"name": "s1", "seed": 1, "temperature": 0.7}, {"name": "g", "role": "gpt", "max_tokens": 9}]}
    )
    s1, g = build_judges(runtime, cfg)
    params = s1.llm.default_params
    assert (s1.name, s1.llm.role, params.seed, params.temperature) == ("s1", "hts_judge", 1, 0.7)
    assert s1.llm.default_params.max_tokens == 64
    assert (g.llm.role, g.llm.default_params.max_tokens, g.llm.default_params.seed) == ("gpt", 9, None)


def test_configured_run_scores_every_dimension():
    runtime = FakeRuntime({"hts_judge": "Verdict: equal", "gpt": "Verdict: A"})
    cfg = HTSConfig.model_validate(
        {
            "resamples": 50,
            "dimensions": ["teaching", "safety"],
            "judges": [{"name": "eq"}, {"name": "a", "role": "gpt"}],
            "validity": {"max_constant_share": 1.0, "alpha": 1e-9},  # these constant judges are kept here
        }
    )
    items = [HTSItem(f"i{n}", "topic", "answer", "tuned", "base") for n in range(10)]
    out = asyncio.run(run_judging(items, runtime, cfg))
    assert set(out["scores"]) == {"teaching", "safety"} and len(out["judgments"]) == 10 * 2 * 2
    a_first = sum(j.system_position == "A" for j in out["judgments"] if j.judge == "a" and j.dimension == "safety")
    assert a_first == 5  # balanced: half of the 10 items show the system's reply first
    expected = 100 * (10 * 2 + a_first * 4) / (20 * 4)
    assert out["scores"]["safety"]["score"] == pytest.approx(expected)
    assert out["position_preference"]["a"]["first_share"] == 1.0
    assert len(out["report"].trace_rows()) == 40
    assert out["withheld"] == [] and out["scores"]["safety"]["kappa"] is not None  # two roles: distinct raters


def test_constant_judges_are_withheld_by_default():
    runtime = FakeRuntime({"hts_judge": "Verdict: equal", "gpt": "Verdict: A"})
    cfg = HTSConfig.model_validate({"resamples": 50, "judges": [{"name": "eq"}, {"name": "a", "role": "gpt"}]})
    items = [HTSItem(f"i{n}", "topic", "answer", "tuned", "base") for n in range(10)]
    out = asyncio.run(run_judging(items, runtime, cfg))
    assert out["withheld"] == ["eq", "a"]
    assert out["validity"]["eq"]["constant_share"] == 1.0 and out["validity"]["a"]["p_value"] < 0.01
    assert {d: (s["score"], s["no_valid_judge"]) for d, s in out["scores"].items()} == {
        d: (None, True) for d in ("humanized", "teaching", "safety")
    }
