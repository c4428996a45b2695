"""What the three experts share: ``NO`` is an empty answer, a reply with nothing of the task's kind
is a ParseError, and each task names its role (an unknown task is named in the error)."""

from __future__ import annotations

import pytest

from pipelines.agents import ParseError
from pipelines.kgc.agents.experts import DISPLAY, EXPERTS, expert_role
from pipelines.kgc.config import ROLES


def test_no_answer_is_empty_not_an_error():
    assert expert_role("re").parse_text("NO").items == []
    assert expert_role("ner").parse_text("Reasons: nothing here.\nAnswer: NO").items == []
    assert expert_role("ee").parse_text("答案：无").items == []


@pytest.mark.parametrize("task", ["ner", "re", "ee"])
@pytest.mark.parametrize("garbage", ["I like football.", "((((", "{}", "| a |", "Answer:"])
def test_garbage_raises_parse_error(task, garbage):
    with pytest.raises(ParseError):
        expert_role(task).parse_text(garbage)


def test_each_task_has_its_role_template_and_display_names():
    assert {task: role.template for task, role in EXPERTS.items()} == {
        "ner": "ner_expert",
        "re": "re_expert",
        "ee": "ee_expert",
    }
    assert ROLES[:3] == tuple(role.template for role in EXPERTS.values())  # each expert's LLM role in kgc.llm
    assert DISPLAY["en"] == {"ner": "NER expert agent", "re": "RE expert agent", "ee": "EE expert agent"}
    assert DISPLAY["zh"]["re"] == "关系抽取专家智能体"
    with pytest.raises(ValueError, match="unknown task 'rel'; use ner, re or ee"):
        expert_role("rel")
