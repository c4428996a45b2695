"""Every RAM2C agent together (``make_agents``): the golden file holds exactly the rendered cases of
every agent (each role's tests compare its own), both languages have every prompt with the same
structure, and an expert's system text is shared across samples."""

import pytest

from pipelines.ram2c.groups import group_experts
from tests.ram2c.agents.prompt_cases import JSON_CASES, agent_of, cases, golden, render_all


def test_the_golden_file_holds_every_rendered_prompt():
    rendered = render_all()
    assert sorted(golden()) == sorted(rendered)


def test_both_languages_have_every_prompt_with_the_same_structure():
    rendered = render_all()
    for case in list(cases("en")) + [f"{c}_json" for c in JSON_CASES]:
        en, zh = rendered[f"{case}.en"], rendered[f"{case}.zh"]
        assert [m["role"] for m in en] == [m["role"] for m in zh], case
        for message in en + zh:
            assert "{{" not in message["content"] and "{%" not in message["content"], case
    assert all(
        any("\u4e00" <= ch <= "\u9fff" for ch in m["content"])
        for k, ms in rendered.items()
        if k.endswith(".zh")
        for m in ms
        if m["role"] == "system"
    )


@pytest.mark.parametrize("agent", ["ballot", "voter", "analyst", "reviser", "analyst_reviser"])
@pytest.mark.parametrize("mode", ["text", "json"])
def test_expert_system_text_is_shared_across_samples(agent, mode):
    """The expert's system message depends on the expert only (and a ballot's on the number of
    documents): byte-identical for every sample."""
    expert = group_experts("P", 1, "en")[0].to_vars()
    a = cases("en")[agent] | {"expert": expert}
    b = {**a, "topic": "Another topic?", "answer": "Another answer.", "reply": "Another reply."}
    if agent == "ballot":
        b["documents"] = ["Other document one.", "Other document two."]
    render = agent_of(agent).render
    assert render("en", output_mode=mode, **a)[0] == render("en", output_mode=mode, **b)[0]
