"""Passages, topics (plans over levels and directions, excluded themes, embedding dedup) and
simulated student personas."""

from pathlib import Path

import numpy as np
import pytest

from pipelines.ram2c.config import Ram2cConfig, SourceConfig, TopicConfig
from pipelines.ram2c.sources import load_passages, split_chapters
from pipelines.ram2c.students import make_personas
from pipelines.ram2c.topics import Topic, select_topics, topic_plans
from tests.ram2c.scripted import FakeEmbedder

PROJECT = Path(__file__).resolve().parents[2]
SHARED = PROJECT.parent / "shared" / "data" / "tutoring" / "robinson_crusoe.txt"


def test_own_texts_give_passages_in_both_languages():
    en = load_passages(
        SourceConfig(language="en", path="missing.txt", fallback="data/ram2c/lighthouse.en.txt", chapters=[4, 5]),
        PROJECT,
    )
    assert [(p.book, p.chapter) for p in en] == [("The Lighthouse Apprentice", 1), ("The Lighthouse Apprentice", 2)]
    assert en[0].text.startswith("Mara was eleven") and len(en[0].text) <= 700 * 1.5
    zh = load_passages(SourceConfig(language="zh", path="data/ram2c/lighthouse.zh.txt"), PROJECT)
    assert [p.book for p in zh] == ["灯塔的学徒", "灯塔的学徒"] and zh[1].text.startswith("这段楼梯")


def test_missing_source_names_both_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt.*nope.txt"):
        load_passages(SourceConfig(language="en", path="missing.txt", fallback="nope.txt"), tmp_path)


def test_chapter_headings_and_missing_chapters(tmp_path):
    text = "Title\n\nCHAPTER I\n\nOne.\n\nCHAPTER II\n\n_Subtitle_\n\nTwo a.\n\nTwo b."
    assert split_chapters(text) == ["One.", "_Subtitle_\n\nTwo a.\n\nTwo b."]
    (tmp_path / "book.txt").write_text(text, encoding="utf-8")
    passages = load_passages(SourceConfig(language="en", path="book.txt", chapters=[2]), tmp_path)
    assert [p.text for p in passages] == ["Two a.\n\nTwo b."]  # the subtitle is not a paragraph
    with pytest.raises(ValueError, match="has 2 chapters"):
        load_passages(SourceConfig(language="en", path="book.txt", chapters=[3]), tmp_path)


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data/tutoring/robinson_crusoe.txt is absent")
def test_robinson_crusoe_chapters():
    passages = load_passages(SourceConfig(language="en", path=str(SHARED), chapters=[1, 5]), PROJECT)
    assert [p.book for p in passages] == ["Robinson Crusoe"] * 2
    assert passages[0].text.startswith("I was born in the year 1632") and "[Illustration" not in passages[0].text


def test_topic_plans_cycle_passages_levels_and_directions():
    passages = load_passages(SourceConfig(language="zh", path="data/ram2c/lighthouse.zh.txt"), PROJECT)
    plans = topic_plans(passages, TopicConfig(), 12)
    assert [p.level for p in plans[:5]] == ["recall", "understanding", "analysis", "evaluation", "creation"]
    assert [p.direction for p in plans[:6]] == ["character"] * 5 + ["plot"]
    assert [p.passage.chapter for p in plans[:4]] == [1, 2, 1, 2]
    assert len({(p.passage.id, p.level, p.direction) for p in plans}) == 12
    assert plans[0].vars("zh", ["宗教"])["level"] == "回忆（记住故事中的事实）"


def test_select_topics_drops_excluded_themes_and_near_duplicates():
    passages = load_passages(SourceConfig(language="zh", path="data/ram2c/lighthouse.zh.txt"), PROJECT)
    plan = topic_plans(passages, TopicConfig(), 1)[0]
    questions = [
        "Why did Mara take the lantern?",
        "Did Mara pray to God in the storm?",  # religion
        "Why did Mara take the lantern ?",  # a duplicate by embedding
        "How did Tobin feel about the lighthouse?",
        "What would you write in your notebook?",
    ]
    embed = lambda texts: FakeEmbedder().encode_queries(texts).dense  # noqa: E731
    kept, dropped = select_topics([Topic(plan, q) for q in questions], embed, TopicConfig(), 2, language="en")
    assert [t.question for t in kept] == ["Why did Mara take the lantern?", "How did Tobin feel about the lighthouse?"]
    assert dropped[0] == {"question": "Did Mara pray to God in the storm?", "reason": "excluded theme: god"}
    assert dropped[1]["reason"] == "duplicate" and dropped[1]["similarity"] == pytest.approx(1.0)
    kept, _ = select_topics([Topic(plan, "玛拉向上帝祈祷了吗？")], embed, TopicConfig(), 2, language="zh")
    assert kept == []


def test_personas_are_distinct_seeded_and_localised():
    en = make_personas(40, "en", seed=3)
    assert len({(p.grade, p.traits, p.interest, p.reading_level) for p in en}) == 40
    assert all(p.traits[0] != p.traits[1] for p in en)
    assert make_personas(40, "en", seed=3) == en and make_personas(40, "en", seed=4) != en
    zh = make_personas(3, "zh", seed=3)
    assert all("\u4e00" <= zh[0].grade[0] <= "\u9fff" for _ in zh)


def test_config_refuses_unknown_roles_directions_and_too_many_experts():
    llm = {"default": {"kind": "scripted", "replies": "x"}}
    with pytest.raises(ValueError, match="unknown role 'judge'"):
        Ram2cConfig(llm={**llm, "roles": {"judge": {"kind": "scripted", "replies": "x"}}})
    with pytest.raises(ValueError, match="unknown directions"):
        Ram2cConfig(llm=llm, topics={"directions": ["religion"]})
    with pytest.raises(ValueError, match="experts_per_group 8 > 7 personas of group T"):
        Ram2cConfig(llm=llm, experts_per_group=8)
    assert Ram2cConfig(llm=llm, experts_per_group=7)  # the paper's Fig. 4 shows 3, 5 and 7 voters
    assert np.isclose(Ram2cConfig(llm=llm).reflection.accept_share, 0.5)


def test_config_refuses_unknown_expert_calls_and_unbounded_analyses():
    llm = {"default": {"kind": "scripted", "replies": "x"}}
    assert Ram2cConfig(llm=llm).expert_call == "joint" and Ram2cConfig(llm=llm).analysis_chars == 600
    with pytest.raises(ValueError, match="expert_call\n  Input should be 'joint' or 'separate'"):
        Ram2cConfig(llm=llm, expert_call="both")
    with pytest.raises(ValueError, match="analysis_chars\n  Input should be greater than or equal to 40"):
        Ram2cConfig(llm=llm, analysis_chars=10)
    with pytest.raises(ValueError, match="max_tokens.analyst_revisor"):
        Ram2cConfig(llm=llm, max_tokens={"analyst_revisor": 100})
