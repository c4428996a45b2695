"""Passages of the source books: own texts in both languages, chapter headings, missing files and chapters."""

from pathlib import Path

import pytest

from pipelines.ram2c.config import SourceConfig
from pipelines.ram2c.sources import load_passages, split_chapters

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
