"""Issue 33.4: every setting explained where it is defined, on a generated page and in each stage's --help."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field

from pipelines.config import StrictModel
from pipelines.params_doc import COMMAND, PAGE, main, missing_descriptions, model_rows, render_page

ROOT = Path(__file__).resolve().parents[1]


def test_the_parameter_page_is_current() -> None:
    page = (ROOT / PAGE).read_text(encoding="utf-8")
    assert page == render_page(), f"{PAGE} is out of date with the config models; run: {COMMAND}"


def test_every_field_of_every_config_model_has_a_description() -> None:
    missing = missing_descriptions()
    assert not missing, "fields without Field(..., description=...):\n  " + "\n  ".join(missing)


class _Leaf(StrictModel):
    size: int = Field(3, ge=1, description="how many")


class _Backend(StrictModel):
    kind: Literal["a"] = Field(description="kind a")
    leaf: _Leaf = Field(_Leaf(), description="a leaf")


class _Other(StrictModel):
    kind: Literal["b"] = Field(description="kind b")


class _Section(StrictModel):
    mode: Literal["text", "json"] = Field("json", description="the mode")
    items: list[_Leaf] = Field([], description="leaves")
    named: dict[str, _Leaf] = Field({}, description="named leaves")
    backend: _Backend | _Other = Field(description="a backend")
    bare: int | None = None


def test_rows_walk_lists_mappings_and_union_kinds_and_point_to_a_model_seen_before() -> None:
    rows = {row.key: row for row in model_rows(_Section, "s.")}
    mode = rows["s.mode"]
    assert (mode.type, mode.default, mode.description) == ("text | json", "json", "the mode")
    assert (rows["s.items[].size"].type, rows["s.items[].size"].default) == ("int (>= 1)", "3")
    assert rows["s.named.<name>.*"].description == "the keys of `s.items[].*`"  # _Leaf: expanded once
    assert rows["s.backend"].default == "required" and rows["s.backend[kind=b].kind"].description == "kind b"
    assert rows["s.backend[kind=a].leaf.*"].type == "_Leaf"
    assert missing_descriptions([_Section, _Leaf]) == [f"{__name__}._Section.bare"]


def test_check_fails_on_a_stale_page_naming_the_command(tmp_path: Path, capsys) -> None:
    stale = tmp_path / "params.md"
    stale.write_text("# old\n", encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    assert f"run: python -m pipelines.params_doc --write {stale}" in capsys.readouterr().err
    assert main(["--write", str(stale)]) == 0 and main(["--check", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == render_page()


def test_a_stage_help_lists_its_keys_with_type_default_and_description(capsys) -> None:
    from stages.generate_kgc import main as generate_kgc

    assert generate_kgc(["--help"]) == 0
    out = capsys.readouterr().out
    assert "params keys (full reference: docs/params.md):" in out
    assert "  kgc.team.rounds (int (>= 0), default 4)\n      collaboration rounds after round 0 (the paper: 4)" in out
    assert "  kgc.datasets[].sample (int | null (>= 1), default 100)\n" in out


def test_params_yaml_points_to_the_reference_and_keeps_one_comment_line_per_key() -> None:
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    assert "docs/params.md" in text.splitlines()[0]
    lines = text.splitlines()
    keyed_then_continued = [
        n for n, (line, nxt) in enumerate(zip(lines, lines[1:], strict=False), 2)
        if " # " in line and nxt.lstrip().startswith("#") and nxt.index("#") == line.index(" # ") + 1
    ]
    assert keyed_then_continued == []  # no comment runs on over a second line
    assert yaml.safe_load(text)["kgc"]["team"]["rounds"] == 1
