"""The pairwise HTS judge: exact prompts in both languages and modes; the parser on clean,
noisy, JSON, empty and garbage replies."""

import pytest

from pipelines.agents import ParseError
from pipelines.evaluation.hts.agents.pairwise_judge import (
    PairVerdict,
    PairwiseOutput,
    from_output,
    load_criteria,
    make_pairwise_judge,
    normalise_choice,
    parse_pairwise,
)

STUDENT = {"grade": "grade 6", "traits": ["shy", "curious"], "interest": "football",
           "reading_level": "reads at grade level"}  # fmt: skip
ITEM = {
    "criteria": load_criteria("en"),
    "topic": "Why does Robinson keep a diary?",
    "student": STUDENT,
    "student_answer": "To not feel alone.",
    "reply_a": "RA",
    "reply_b": "RB",
}


def test_english_prompt_is_exact_with_the_persona_and_one_dimensions_criteria():
    judge = make_pairwise_judge()
    messages = judge.render("en", dimension="humanized", **ITEM)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == (
        "Dimension to judge: humanized communication\n\n"
        "Discussion topic: Why does Robinson keep a diary?\n"
        "Student: grade 6, shy and curious, likes football, reads at grade level\n"
        "Student's answer: To not feel alone.\n\n"
        "Reply A:\nRA\n\n"
        "Reply B:\nRB"
    )
    system = messages[0]["content"]
    assert system.startswith(
        "You are an experienced teacher judging two replies that an AI teacher could give to a primary or "
        "secondary school student in a literature discussion, on humanized communication."
    )
    assert "Humanized communication:\n1.1 The reply is written in a student's voice" in system
    assert "1.7 The student's background, hobbies and experience are not used to personalise the reply." in system
    assert "2.1" not in system and "3.1" not in system  # only the judged dimension's criteria
    assert system.endswith(
        'Then end with one line: "Verdict: A" if reply A is better, "Verdict: B" if reply B is better, '
        'or "Verdict: equal" if neither is better.'
    )
    other = judge.render("en", **{**ITEM, "topic": "x", "student": None, "reply_a": "1"}, dimension="humanized")
    assert other[0] == messages[0]  # byte-identical across the items of a dimension
    assert "Student: profile not recorded\n" in other[1]["content"]
    teaching = judge.render("en", **ITEM, dimension="teaching")[0]["content"]
    assert "2.11 Interaction and discussion among students are not encouraged." in teaching and "1.1" not in teaching


def test_chinese_prompt_and_json_mode():
    judge = make_pairwise_judge()
    messages = judge.render("zh", dimension="humanized", **{**ITEM, "criteria": load_criteria("zh"),
                            "student": {**STUDENT, "grade": "六年级", "traits": ["害羞", "好奇"], "interest": "足球",
                                        "reading_level": "阅读水平与年级相当"}})  # fmt: skip
    assert messages[1]["content"] == (
        "评判维度：人性化沟通\n\n讨论话题：Why does Robinson keep a diary?\n"
        "学生：六年级学生，害羞、好奇，喜欢足球，阅读水平与年级相当\n学生的回答：To not feel alone.\n\n"
        "回复 A：\nRA\n\n回复 B：\nRB"
    )
    assert "1.5 出现非对话语言的语句。" in messages[0]["content"]
    assert messages[0]["content"].endswith("或 \"结论：相同\"（两者相当）。")
    json_messages = judge.render("en", dimension="humanized", output_mode="json", **ITEM)
    assert json_messages[0]["content"].endswith(
        'Reply with one JSON object and nothing else: {"reasoning": "<one to three sentences citing the criteria '
        'by number>", "verdict": "A" or "B" or "equal"}, where "verdict" is "A" if reply A is better, "B" if reply '
        'B is better, "equal" if neither is better.'
    )
    assert judge.json_schema["properties"]["verdict"]["enum"] == ["A", "B", "equal"]
    assert judge.json_schema["properties"]["reasoning"]["maxLength"] == 240
    assert json_messages[1] == judge.render("en", dimension="humanized", **ITEM)[1]


def test_criteria_are_table_5_in_both_languages():
    en, zh = load_criteria("en"), load_criteria("zh")
    assert list(en) == list(zh) == ["humanized", "teaching", "safety"]
    assert [len(en[d]["criteria"]) for d in en] == [7, 11, 5]
    for d in en:
        assert [c["code"] for c in en[d]["criteria"]] == [c["code"] for c in zh[d]["criteria"]]
    assert en["teaching"]["criteria"][9] == {"code": "2.10", "text": "The reply contains factual errors."}
    with pytest.raises(FileNotFoundError, match="have: en, zh"):
        load_criteria("fr")


def test_judge_role_and_languages():
    judge = make_pairwise_judge(max_attempts=3)
    assert judge.role == "hts_judge" and judge.max_attempts == 3
    assert judge.template.languages() == ["en", "zh"]


@pytest.mark.parametrize(
    ("reply", "choice"),
    [
        ("Reply A asks an open question (2.1).\nVerdict: A", "A"),
        ("B is warmer.\nVerdict: B", "B"),
        ("Both are fine.\nVerdict: equal", "equal"),
        ("verdict:   **B**", "B"),
        ("Verdict: Reply A.", "A"),
        ("I think <B> is better.", "B"),
        ("Verdict: A\n... on reflection, Verdict: tie", "equal"),
        ("回复 B 更有温度。\n结论：B", "B"),
        ("两者差不多。结论：相同", "equal"),
        ('{"reasoning": "A is kinder", "verdict": "A"}', "A"),
        ('Here you go:\n```json\n{"reasoning": "same", "verdict": "Equal",}\n```', "equal"),
        ("{'reasoning': 'b', 'verdict': 'b'}", "B"),
    ],
)
def test_parser_clean_noisy_and_json(reply, choice):
    assert parse_pairwise(reply).choice == choice


def test_parser_keeps_reasoning():
    assert parse_pairwise("A cites 2.7.\nVerdict: A") == PairVerdict("A", "A cites 2.7.")
    assert parse_pairwise('{"reasoning": " kind ", "verdict": "B"}') == PairVerdict("B", "kind")


@pytest.mark.parametrize(
    "reply",
    ["", "   ", "I cannot decide.", "Verdict: C", "Verdict: Both", '{"verdict": "maybe"}', "%%%", "<think>"],
)
def test_parser_rejects_empty_and_garbage(reply):
    judge = make_pairwise_judge()
    with pytest.raises(ParseError):
        judge.parse(reply)


def test_normalise_choice_and_typed_output():
    choices = [normalise_choice(x) for x in ("a", " Reply B ", "TIE", "相同", "same.")]
    assert choices == ["A", "B", "equal", "equal", "equal"]
    with pytest.raises(ParseError):
        normalise_choice("neither")
    assert from_output(PairwiseOutput(reasoning=" r ", verdict="B")) == PairVerdict("B", "r")


def test_json_mode_parse_validates_the_schema():
    judge = make_pairwise_judge()
    assert judge.parse('{"reasoning": "kinder", "verdict": "B"}', "json") == PairVerdict("B", "kinder")
    for bad in ('{"reasoning": "x", "verdict": "C"}', '{"verdict": "A"}', "Verdict: A", ""):
        with pytest.raises(ParseError):
            judge.parse(bad, "json")
