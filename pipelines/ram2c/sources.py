"""Book passages for the discussions: chapters found by their headings, passages cut at paragraphs.

    passages = load_passages(source_cfg, root=".")
    # [Passage(book="Robinson Crusoe", chapter=1, index=0, text="I was born in the year 1632 ...")]

The preferred text (``path``, e.g. Robinson Crusoe in ``../shared``) is used when present, else the
``fallback`` the project ships (``data/ram2c/``); the book title is the text's first non-empty line.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from pipelines.ram2c.config import SourceConfig

log = logging.getLogger(__name__)

HEADING = re.compile(r"^\s*(CHAPTER\s+[IVXLC\d]+\.?|第[一二三四五六七八九十百零〇\d]+章)\s*$", re.M)
ILLUSTRATION = re.compile(r"\[Illustration:.*?\]", re.S)


@dataclass(frozen=True)
class Passage:
    book: str
    chapter: int
    index: int
    text: str
    language: str

    @property
    def id(self) -> str:
        return f"ch{self.chapter}-p{self.index}"


def resolve_path(cfg: SourceConfig, root: Path) -> tuple[Path, bool]:
    """The file to read and whether it is the fallback: ``path`` if it exists, else ``fallback``;
    FileNotFoundError names both."""
    preferred = root / cfg.path
    if preferred.is_file():
        return preferred, False
    if cfg.fallback and (root / cfg.fallback).is_file():
        log.info("ram2c: %s not found; using the project's own text %s", preferred, cfg.fallback)
        return root / cfg.fallback, True
    tried = ", ".join(str(p) for p in [preferred, root / cfg.fallback if cfg.fallback else None] if p)
    raise FileNotFoundError(f"no source text for language {cfg.language!r} (tried {tried}); fix ram2c.sources")


def _title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first.title() if first.isupper() else first


def split_chapters(text: str) -> list[str]:
    """Chapter bodies in order (the whole text after the title when there is no heading)."""
    marks = list(HEADING.finditer(text))
    if not marks:
        lines = text.strip().splitlines()
        return ["\n".join(lines[1:]).strip()]
    return [
        text[m.end() : nxt.start() if nxt else len(text)].strip()
        for m, nxt in zip(marks, marks[1:] + [None], strict=True)
    ]


def _paragraphs(body: str) -> list[str]:
    body = ILLUSTRATION.sub("", body)
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", body)]
    # a subtitle line such as "_Robinson's Family--His Elopement_" is not a paragraph of the story
    return [p for p in paragraphs if p and not (p.startswith("_") and p.endswith("_"))]


def passages_of(body: str, n: int, chars: int) -> list[str]:
    """``n`` passages spread evenly over a chapter, each whole paragraphs up to about ``chars``."""
    paragraphs = _paragraphs(body)
    if not paragraphs:
        return []
    starts = sorted({round(i * len(paragraphs) / n) for i in range(n)})
    out = []
    for start in starts:
        taken: list[str] = []
        for p in paragraphs[start:]:
            if taken and sum(len(t) for t in taken) + len(p) > chars:
                break
            taken.append(p)
        text = "\n\n".join(taken)
        out.append(text if len(text) <= chars * 1.5 else text[: int(chars * 1.5)].rsplit(" ", 1)[0] + " ...")
    return out


def load_passages(cfg: SourceConfig, root: Path | str = ".") -> list[Passage]:
    """The passages of one source (see the module docstring); ``chapters`` apply to ``path`` only
    (every chapter of the fallback text is used)."""
    path, is_fallback = resolve_path(cfg, Path(root))
    text = path.read_text(encoding="utf-8").lstrip("\ufeff")
    book = _title(text)
    chapters = split_chapters(text)
    wanted = (not is_fallback and cfg.chapters) or list(range(1, len(chapters) + 1))
    missing = [c for c in wanted if not 1 <= c <= len(chapters)]
    if missing:
        raise ValueError(f"{path}: has {len(chapters)} chapters; ram2c.sources chapters {missing} do not exist")
    out = []
    for number in wanted:
        for i, passage in enumerate(passages_of(chapters[number - 1], cfg.passages_per_chapter, cfg.passage_chars)):
            out.append(Passage(book, number, i, passage, cfg.language))
    return out
