"""What holds for every tagging role: empty and garbage replies never parse (text and json mode),
json mode adds only the schema to the system text, the system text is shared across samples, and
the golden file holds exactly the roles' cases and the SFT target."""

import json
from itertools import chain

import pytest

from pipelines.agents import ParseError
from pipelines.tagging.agents.numerical_judge import make_arg_extractor, make_program_writer
from pipelines.tagging.agents.planner import make_planner
from pipelines.tagging.agents.semantic_judge import make_semantic_judge
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.agents.solver import make_solver
from tests.tagging.agents.prompt_cases import LANGUAGES, ROLE_CASES, cases, golden, rendered

AGENTS = [
    make_planner(),
    make_solver(),
    make_semantic_judge(),
    make_arg_extractor(),
    make_program_writer(),
    make_single_llm(),
]
GARBAGE = ["!!!???", "lorem ipsum dolor", "}{", "<maybe>", "```\n```"]


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.name)
def test_every_agent_rejects_empty_and_garbage(agent):
    for bad in ("", "  \n\t", None, *GARBAGE):
        with pytest.raises(ParseError):
            agent.parse(bad)


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.name)
def test_every_agent_in_json_mode_rejects_empty_garbage_and_off_schema(agent):
    for bad in ("", "  \n\t", None, *GARBAGE, '{"unexpected": 1}', "[1, 2]"):
        with pytest.raises(ParseError):
            agent.parse(bad, "json")
    assert agent.json_schema["type"] == "object"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_json_mode_adds_the_schema_to_the_system_text_only(lang):
    r = rendered()
    wording = {"en": "reply with one JSON object that matches this JSON schema", "zh": "只回复一个符合下面 JSON schema"}
    for name, (agent, _) in cases(lang).items():
        text, json_mode = r[f"{name}.{lang}"], r[f"{name}.json.{lang}"]
        assert json_mode[1] == text[1], name  # the sample part is the same
        assert json_mode[0]["content"].startswith(text[0]["content"]), name
        added = json_mode[0]["content"][len(text[0]["content"]) :]
        assert wording[lang] in added and added.endswith(agent.output_schema_text()), name
        assert json.loads(agent.output_schema_text()) == agent.json_schema


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_system_text_is_shared_across_samples(lang):
    """Every sample variable changed, the system text stays (``program`` is the run's form, not a sample's)."""
    for name, (agent, vars) in cases(lang).items():
        other = {k: (v + " changed" if isinstance(v, str) and k != "program" else v) for k, v in vars.items()}
        assert agent.render(lang, **vars)[0] == agent.render(lang, **other)[0], name
        assert agent.render(lang, output_mode="json", **vars)[0] == agent.render(lang, output_mode="json", **other)[0]


def test_golden_file_holds_exactly_the_role_cases_and_the_sft_target():
    """Each case belongs to one role's test, and no golden entry is left unchecked."""
    names = list(chain.from_iterable(ROLE_CASES.values()))
    assert sorted(names) == sorted(set(names)) == sorted(cases("en")) == sorted(cases("zh"))
    assert sorted(golden()) == sorted(rendered())
    assert {key for key in golden() if key.startswith("sft_target.")} == {f"sft_target.{lang}" for lang in LANGUAGES}
