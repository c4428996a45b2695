"""Topics: plans over passages, levels and directions; excluded themes and embedding dedup."""

from pathlib import Path

import pytest

from pipelines.ram2c.config import SourceConfig, TopicConfig
from pipelines.ram2c.sources import load_passages
from pipelines.ram2c.topics import Topic, select_topics, topic_plans
from tests.ram2c.scripted import FakeEmbedder

PROJECT = Path(__file__).resolve().parents[2]


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
