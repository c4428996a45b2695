"""Simulated student personas."""

from pipelines.ram2c.students import make_personas


def test_personas_are_distinct_seeded_and_localised():
    en = make_personas(40, "en", seed=3)
    assert len({(p.grade, p.traits, p.interest, p.reading_level) for p in en}) == 40
    assert all(p.traits[0] != p.traits[1] for p in en)
    assert make_personas(40, "en", seed=3) == en and make_personas(40, "en", seed=4) != en
    zh = make_personas(3, "zh", seed=3)
    assert all("\u4e00" <= zh[0].grade[0] <= "\u9fff" for _ in zh)
