"""Exact rendered prompts of every RAM2C agent, in English and Chinese.

The expected messages are in ``golden/prompts.json`` (reviewed by hand). After an intended template
change, regenerate with ``EDUMAS_UPDATE_GOLDEN=1 pytest tests/ram2c/test_prompts.py`` and review the diff.
Two prompts are also spelled out here in full, and the shared system text is checked to be
byte-identical across samples.
"""

import json
import os
from pathlib import Path

import pytest

from pipelines.ram2c.agents import make_agents
from pipelines.ram2c.groups import group_experts
from pipelines.ram2c.scenario import load_scenario, theme_names
from pipelines.ram2c.students import make_personas

GOLDEN = Path(__file__).parent / "golden" / "prompts.json"
AGENTS = make_agents()
TEXT = {
    "en": {
        "book": "The Lighthouse Apprentice",
        "topic": "Why did Mara take the lantern?",
        "answer": "Because Tobin was hurt and ships were out there.",
        "reply": "Good thinking! What would you do?",
        "passage": "Mara looked at the stair, then at the old man.",
        "group_name": "language teachers",
    },
    "zh": {
        "book": "灯塔的学徒",
        "topic": "玛拉为什么接过提灯？",
        "answer": "因为托宾受伤了，海上还有船。",
        "reply": "想得真好！换作你会怎么做？",
        "passage": "玛拉看看楼梯，又看看老人。",
        "group_name": "语文教师",
    },
}


def cases(lang):
    t = TEXT[lang]
    student = make_personas(1, lang, seed=0)[0].to_vars()
    expert = group_experts("T", 1, lang)[0].to_vars()
    history = [{"role": "user", "content": t["answer"]}, {"role": "assistant", "content": t["reply"]}]
    common = {"topic": t["topic"], "answer": t["answer"], "reply": t["reply"]}
    scenario = load_scenario()
    level, direction = scenario["levels"]["recall"][lang], scenario["directions"]["plot"][lang]
    return {
        "topic_writer": {
            "book": t["book"],
            "chapter": 1,
            "passage": t["passage"],
            "level": level,
            "direction": direction,
            "avoid": theme_names(["religion"], lang),
        },
        "student": {"book": t["book"], "student": student, "topic": t["topic"], "teacher_reply": None},
        "student_later_turn": {"book": t["book"], "student": student, "topic": t["topic"], "teacher_reply": t["reply"]},
        "drafter": {"book": t["book"], "topic": t["topic"], "student": student, "answer": t["answer"], "history": []},
        "drafter_later_turn": {
            "book": t["book"],
            "topic": t["topic"],
            "student": student,
            "answer": t["answer"],
            "history": history,
        },
        "voter": {**common, "expert": expert, "group_name": t["group_name"], "document": t["passage"]},
        "ballot": {**common, "expert": expert, "group_name": t["group_name"], "documents": [t["passage"], t["reply"]]},
        "analyst": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "reference": t["passage"],
        },
        "analyst_no_reference": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "reference": None,
        },
        "analyst_reviser": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "reference": t["passage"],
        },
        "analyst_reviser_no_reference": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "reference": None,
        },
        "reviser": {
            **common,
            "expert": expert,
            "group_name": t["group_name"],
            "student": student,
            "analysis": "The student is caring.",
        },
        "synthesizer": {
            "topic": t["topic"],
            "answer": t["answer"],
            "student": student,
            "revisions": ["First version.", "Second version."],
        },
    }


JSON_CASES = (
    "ballot",
    "voter",
    "analyst",
    "reviser",
    "analyst_reviser",
    "synthesizer",
    "drafter",
    "student",
    "topic_writer",
)
"""Cases also rendered in json mode (the default output mode): the one-line reply example in the system text."""


def agent_of(case: str):
    name = case.split("_later")[0].split("_no_")[0]
    return AGENTS["ballot:2" if name == "ballot" else name]


def render_all():
    out = {}
    for lang in ("en", "zh"):
        for case, vars in cases(lang).items():
            out[f"{case}.{lang}"] = agent_of(case).render(lang, **vars)
            if case in JSON_CASES:
                out[f"{case}_json.{lang}"] = agent_of(case).render(lang, output_mode="json", **vars)
    return out


def test_rendered_prompts_match_the_golden_file():
    rendered = render_all()
    if os.environ.get("EDUMAS_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(rendered, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(golden) == sorted(rendered)
    for key, messages in rendered.items():
        assert messages == golden[key], key


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


def test_two_prompts_spelled_out():
    student = make_personas(1, "en", seed=0)[0].to_vars()
    assert student == {
        "id": "s0",
        "grade": "grade 6",
        "traits": ["curious", "playful"],
        "interest": "cooking",
        "reading_level": "reads at grade level",
    }
    t = TEXT["en"]
    messages = AGENTS["synthesizer"].render(
        "en", topic=t["topic"], answer=t["answer"], student=student, revisions=["First version.", "Second version."]
    )
    assert messages[1]["content"] == (
        "Student: grade 6, curious and playful, likes cooking, reads at grade level\n"
        "Topic: Why did Mara take the lantern?\n"
        "Student's answer: Because Tobin was hurt and ships were out there.\n\n"
        "Version 1: First version.\n\n"
        "Version 2: Second version.\n\n"
        "Final reply:"
    )
    zh = TEXT["zh"]
    expert = group_experts("T", 1, "zh")[0].to_vars()
    voter = AGENTS["voter"].render(
        "zh",
        topic=zh["topic"],
        answer=zh["answer"],
        reply=zh["reply"],
        expert=expert,
        group_name=zh["group_name"],
        document=zh["passage"],
    )
    assert voter[0]["content"].startswith(
        "你是林老师，一位教了二十年小学语文的老师，最在意回复是否温暖、生动、孩子能听懂。你属于一个由语文教师组成的小组"
    )
    assert voter[1]["content"] == (
        "话题：玛拉为什么接过提灯？\n学生的回答：因为托宾受伤了，海上还有船。\n当前回复：想得真好！换作你会怎么做？\n\n"
        "文档：\n玛拉看看楼梯，又看看老人。\n\n这篇文档在“语言风格”方面有参考价值吗？是或否："
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


def test_ballot_prompt_spelled_out():
    expert = group_experts("E", 1, "en")[0].to_vars()
    t = TEXT["en"]
    messages = AGENTS["ballot:2"].render(
        "en",
        output_mode="json",
        topic=t["topic"],
        answer=t["answer"],
        reply=t["reply"],
        expert=expert,
        group_name="safety and ethics experts",
        documents=["Doc one.", "Doc two."],
    )
    assert messages[0]["content"] == (
        "You are Ms. Reyes, a child-safety officer who removes anything harmful, frightening or disrespectful and "
        "handles dark story events gently. You belong to a group of safety and ethics experts who improve a "
        "teacher's reply to a student. The group is reviewing retrieved documents before revising the reply. "
        "Judge every document along your own dimension, safety: could it help improve the reply to this student? "
        "A document can be useful by its style, its method or an example even when its topic differs. "
        'Answer "yes" or "no" for each document, by its number.\n\n'
        "Reply with JSON only, in this form:\n"
        '{"1": "<yes or no>", "2": "<yes or no>"}'
    )
    assert messages[1]["content"] == (
        "Topic: Why did Mara take the lantern?\n"
        "Student's answer: Because Tobin was hurt and ships were out there.\n"
        "Current reply: Good thinking! What would you do?\n\n"
        "Document 1:\nDoc one.\n\n"
        "Document 2:\nDoc two.\n\n"
        "Is each document a useful reference for safety? yes or no for each number:"
    )
    zh = TEXT["zh"]
    messages = AGENTS["ballot:2"].render(
        "zh",
        output_mode="json",
        topic=zh["topic"],
        answer=zh["answer"],
        reply=zh["reply"],
        expert=group_experts("E", 1, "zh")[0].to_vars(),
        group_name="安全与伦理专家",
        documents=["文档甲。", "文档乙。"],
    )
    assert messages[0]["content"].endswith(
        "按编号对每一篇回答“是”或“否”。\n\n只用 JSON 回复，格式如下：\n"
        '{"1": "<yes 或 no>", "2": "<yes 或 no>"}'
    )
    assert messages[1]["content"] == (
        "话题：玛拉为什么接过提灯？\n学生的回答：因为托宾受伤了，海上还有船。\n当前回复：想得真好！换作你会怎么做？\n\n"
        "文档1：\n文档甲。\n\n文档2：\n文档乙。\n\n"
        "每一篇文档在“安全”方面有参考价值吗？请按编号回答是或否："
    )


def test_drafter_prompt_is_system_history_then_the_latest_answer():
    rendered = render_all()
    roles = [m["role"] for m in rendered["drafter_later_turn.en"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert rendered["drafter_later_turn.en"][0] == rendered["drafter.en"][0]
