"""The documentation: the site builds with no broken link or anchor (README included), and the
README's table of contents and everything it names (commands, params keys, paths) exist."""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import markdown
import pytest
import yaml

from pipelines.config import params_key_exists

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS_FILES = ("mkdocs.yml", "README.md", "LICENSE", "docs")


def mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(root / "mkdocs.yml"),
         "--site-dir", str(site)],
        capture_output=True, text=True, cwd=root, timeout=120,
    )


def test_the_docs_build_with_no_broken_link_or_anchor(tmp_path: Path) -> None:
    build = mkdocs_build(ROOT, tmp_path / "site")
    assert build.returncode == 0, build.stdout + build.stderr
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "Quick start" in home and 'href="configuration/' in home  # the README, its page links site-relative
    assert (tmp_path / "site" / "LICENSE").is_file()  # a repository file the README links to


@pytest.mark.parametrize(
    ("where", "link", "says"),
    [
        ("README.md", "[x](docs/configuration.md#no-such-heading)", "no-such-heading"),
        ("README.md", "[x](docs/no-such-page.md)", "no-such-page.md"),
        ("README.md", "[x](NO_SUCH_FILE)", "NO_SUCH_FILE"),
        ("docs/runtime.md", "[x](clusters.md#no-such-step)", "no-such-step"),
    ],
)
def test_a_broken_link_fails_the_build(tmp_path: Path, where: str, link: str, says: str) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in DOCS_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, copy / name)
    with open(copy / where, "a", encoding="utf-8") as handle:
        handle.write(f"\nSee {link}.\n")
    build = mkdocs_build(copy, tmp_path / "site")
    assert build.returncode != 0 and says in build.stdout + build.stderr


# --- the README's table of contents and the names it uses ---------------------------------------------


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def test_the_readme_fits_a_screen_or_two() -> None:
    assert len(readme_text().splitlines()) <= 250


def test_the_table_of_contents_lists_every_section() -> None:
    md = markdown.Markdown(extensions=["toc"])
    md.convert(readme_text())
    (title,) = md.toc_tokens
    sections = {t["id"]: t["name"] for t in title["children"]}
    contents = readme_text().split("## Contents", 1)[1].split("\n## ", 1)[0]
    linked = re.findall(r"\]\(#([^)]+)\)", contents)
    assert linked, "the Contents section links no section"
    assert set(linked) == set(sections) - {"contents"}, sections
    pages = set(re.findall(r"\]\(docs/([a-z0-9_]+\.md)\)", readme_text()))
    assert pages == {p.name for p in (ROOT / "docs").glob("*.md")}  # every docs page is in the README's table


def code_spans(text: str) -> list[str]:
    """Inline code and the lines of fenced blocks (comments cut) of a Markdown text."""
    spans: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        spans += [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    spans += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [s for s in spans if s]


COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(python -m |make |dvc |pip install )")


def readme_commands() -> list[str]:
    return [s for s in code_spans(readme_text()) if COMMAND.match(s)]


@functools.cache
def params() -> dict:
    """params.yaml, parsed once per session (the pure-Python YAML parser takes about 0.1 s a time and
    the path checks ask hundreds of times); read only."""
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def _lookup(scope: dict, dotted: str):
    node = scope
    for part in dotted.split("."):
        node = node[part]
    return node


def _resolved(text: str, scope: dict) -> str:
    """``text`` with dvc.yaml's ``${...}`` interpolations taken from ``scope`` (params, ``item``, ``key``)."""
    return re.sub(r"\$\{([^}]+)\}", lambda m: str(_lookup(scope, m.group(1))), text)


@functools.cache
def _dvc_stage_scopes() -> tuple[tuple[str, dict, dict], ...]:
    """(stage name, its body, interpolation scope) per stage of dvc.yaml, ``foreach`` expanded as DVC does."""
    found = []
    for name, stage in yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"].items():
        if "foreach" not in stage:
            found.append((name, stage, dict(params())))
            continue
        items = stage["foreach"]
        if isinstance(items, str):  # foreach: ${train} -> the params mapping's keys and values
            items = _lookup(params(), items.strip("${}"))
        pairs = items.items() if isinstance(items, dict) else ((item, item) for item in items)
        found += [(f"{name}@{key}", stage["do"], dict(params(), item=item, key=key)) for key, item in pairs]
    return tuple(found)


@functools.cache
def dvc_outputs() -> tuple[str, ...]:
    """Every out, metric and plot path of dvc.yaml (``foreach`` stages expanded, ``${...}`` from params)."""
    paths = []
    for _, body, scope in _dvc_stage_scopes():
        for kind in ("outs", "metrics", "plots"):
            for entry in body.get(kind, []):
                name = next(iter(entry)) if isinstance(entry, dict) else entry
                paths.append(_resolved(name, scope))
    return tuple(paths)


def dvc_stages() -> set[str]:
    return {name for name, _, _ in _dvc_stage_scopes()}


def check_command(command: str) -> None:
    """Raise AssertionError when ``command`` names a module, flag, make target, stage or key that does not exist."""
    words = shlex.split(re.sub(r"<[^>]*>", "*", re.sub(r"\[[^\]]*\]", "", command)))
    while words and re.match(r"^[A-Z_]+=", words[0]):
        words.pop(0)
    tool, args = words[0], words[1:]
    if tool == "make":
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        for target in args:
            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{command}: no make target {target}"
    elif tool == "python":
        module = args[1]
        if module.endswith(".*"):  # python -m stages.<name>: every stage's module
            for cmd in re.findall(r"cmd: python -m (\S+)", (ROOT / "dvc.yaml").read_text(encoding="utf-8")):
                check_command(f"python -m {cmd}")
            return
        path = ROOT / module.replace(".", "/")
        source = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__main__.py"
        assert source.is_file(), f"{command}: no module {module}"
        text = source.read_text(encoding="utf-8")
        if source.name != "__main__.py" and (source.parent / "__main__.py").is_file():
            text += (source.parent / "__main__.py").read_text(encoding="utf-8")
        stage_cli = module.startswith("stages.")
        for flag in (a.split("=", 1)[0] for a in args[2:] if a.startswith("--")):
            known = stage_cli and flag in ("--params", "--section", "--debug", "--shard")
            assert known or f'"{flag}"' in text, f"{command}: {module} has no option {flag}"
    elif tool == "dvc":
        sub = args[0]
        assert sub in {"repro", "exp", "metrics", "plots", "commit", "queue", "status"}, f"{command}: dvc {sub}?"
        if sub in {"repro", "commit"}:
            for stage in (a for a in args[1:] if not a.startswith("-") and a != "*"):
                assert stage in dvc_stages(), f"{command}: no DVC stage {stage}"
        for flag, value in zip(args, args[1:], strict=False):
            if flag == "-S":
                key = value.split("=", 1)[0].strip("'")
                assert params_key_exists(params(), key), f"{command}: no params key {key}"


def test_every_command_the_readme_names_exists() -> None:
    commands = readme_commands()
    assert {"make run", "make test", "dvc repro"} <= {c.split("  ")[0].strip() for c in commands}, commands
    for command in commands:
        check_command(command)


@pytest.mark.parametrize(
    "bad",
    ["make tests", "python -m stages.generate_taging", "python -m pipelines.profiles smoke --prnt",
     "dvc repro generate_tag", "dvc exp run -S tagging.concurency=4"],
)
def test_a_misnamed_command_is_caught(bad: str) -> None:
    with pytest.raises(AssertionError):
        check_command(bad)


KEY = re.compile(r"^[a-z_]+(\.[a-z_0-9]+)+(: .*)?$")
PATH = re.compile(r"^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-{},<>*]*)+$|^[A-Za-z0-9_\-]+\.(md|yaml|toml|txt|html|json)$")


def check_path(path: str) -> None:
    """Raise AssertionError unless ``path`` (``{a,b}`` alternatives, ``<x>`` placeholders) is in the
    repository or made by a stage (an out of dvc.yaml, or a file inside one)."""
    for one in _expand(path):
        pattern = re.sub(r"<[^>]+>", "*", one).rstrip("/")
        on_disk = any(ROOT.glob(pattern)) or (ROOT / pattern).exists()
        produced = any(
            fnmatch(out, pattern) or out.startswith(pattern + "/") or pattern.startswith(out + "/")
            for out in dvc_outputs()
        )
        assert on_disk or produced, f"README names {path!r}: no such file or stage output"


def test_every_params_key_and_path_the_readme_names_exists() -> None:
    spans = code_spans(readme_text())
    sections = set(params())
    keys = [s.split(":", 1)[0] for s in spans if KEY.match(s) and s.split(".", 1)[0] in sections]
    assert "llm.default" in keys, keys  # the backend switch
    for key in keys:
        assert params_key_exists(params(), key), f"README names params key {key!r}, which params.yaml lacks"
    paths = [s for s in spans if PATH.match(s) and not KEY.match(s)]
    assert "reports/summary.html" in paths
    for path in paths:
        check_path(path)


@pytest.mark.parametrize(
    "bad", ["reports/sumary.html", "data/generated/ram2c/{dpo,sf}.jsonl", "configs/profiles/smok.yaml"]
)
def test_a_misnamed_path_is_caught(bad: str) -> None:
    with pytest.raises(AssertionError):
        check_path(bad)


def _expand(path: str) -> list[str]:
    match = re.search(r"\{([^}]*)\}", path)
    if not match:
        return [path]
    parts = [part for part in match.group(1).split(",") if part != "..."]
    return [e for part in parts for e in _expand(path[: match.start()] + part + path[match.end() :])]
