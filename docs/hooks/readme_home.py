"""MkDocs hook: the README is the site's home page (``index.md``), so its links and anchors are
checked by the same ``mkdocs build --strict`` as the pages'.

The README links to pages as ``docs/<page>.md`` (right on GitHub); on the site they are
``<page>.md``. A link to another file of the repository (``LICENSE``) is added to the site as that
file, so it resolves; a link to a file that does not exist stays broken and fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

README = "README.md"
LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s#]+)(#[^)\s]*)?\)")


def _site_target(target: str) -> str:
    return target[len("docs/") :] if target.startswith("docs/") else target


def readme_as_home(text: str) -> tuple[str, list[str]]:
    """The README's text with page links made site-relative, and the repository files it links to."""
    others: list[str] = []

    def rewrite(match: re.Match) -> str:
        target, anchor = match.group(1), match.group(2) or ""
        if not target.startswith("docs/"):
            others.append(target)
        return f"]({_site_target(target)}{anchor})"

    return LINK.sub(rewrite, text), others


def on_files(files: Files, config) -> Files:
    root = Path(config.config_file_path).parent
    text, others = readme_as_home((root / README).read_text(encoding="utf-8"))
    files.append(File.generated(config, "index.md", content=text))
    for target in dict.fromkeys(others):
        path = root / target
        if path.is_file() and files.get_file_from_path(target) is None:
            files.append(File.generated(config, target, abs_src_path=str(path)))
    return files
