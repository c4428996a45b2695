"""The scenario data (``agents/scenario.yaml``): Bloom levels, learning directions, excluded
themes, student vocabulary, expert personas and the words a final reply must not contain."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

SCENARIO = Path(__file__).parent / "agents" / "scenario.yaml"


@lru_cache(maxsize=4)
def load_scenario(path: str | None = None) -> dict[str, Any]:
    """The parsed scenario file (cached); raises FileNotFoundError naming the file."""
    file = Path(path) if path else SCENARIO
    with open(file, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def theme_words(themes: list[str], language: str) -> list[str]:
    """Words revealing each excluded theme (a theme the file does not list stands for itself)."""
    known = load_scenario()["themes"]
    words: list[str] = []
    for theme in themes:
        words.extend(known[theme][language] if theme in known else [theme])
    return words


def theme_names(themes: list[str], language: str) -> list[str]:
    """Display names of the excluded themes in ``language`` (an unlisted theme is its own name)."""
    known = load_scenario()["themes"]
    return [known[t]["name"][language] if t in known else t for t in themes]
