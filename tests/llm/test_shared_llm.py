"""The top-level ``llm:``: every section inherits it, so switching every role to a served model is
one params line (or the ``served`` profile); a section's own roles, default and cache still win;
the top-level block is as strict as the rest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from dvc.utils.hydra import apply_overrides

from pipelines.config import ConfigError, load_section, params_key_exists, read_yaml, section_from_params
from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.report.inputs import backend_specs, offline_default
from pipelines.kgc.config import ROLES as KGC_ROLES
from pipelines.kgc.config import KGCConfig
from pipelines.profiles import apply_profile, load_profile, set_flags
from pipelines.ram2c.config import ROLES as RAM2C_ROLES
from pipelines.ram2c.config import Ram2cConfig
from pipelines.retrieval.config import BuildKBConfig
from pipelines.tagging.config import ROLES as TAGGING_ROLES
from pipelines.tagging.config import TaggingConfig

ROOT = Path(__file__).resolve().parents[2]
SERVED = (
    "  default: {kind: openai, model: Qwen2.5-7B-Instruct, base_urls: [http://127.0.0.1:8000/v1], api_key_env: null}"
)
TEAMS = {"tagging": (TaggingConfig, TAGGING_ROLES), "kgc": (KGCConfig, KGC_ROLES), "ram2c": (Ram2cConfig, RAM2C_ROLES)}


def every_role_spec(params: Path) -> dict[str, object]:
    """``{"<section>.<role>": backend spec}`` for every LLM role of every section that has one."""
    specs = {}
    for section, (model, roles) in TEAMS.items():
        llm = load_section(section, model, params).llm
        specs |= {f"{section}.{role}": llm.spec_for(role) for role in roles}
    quality = load_section("build_kb", BuildKBConfig, params).quality.llm
    specs["build_kb.quality.query_rewriter"] = quality.spec_for("query_rewriter")
    judge = load_section("evaluate", EvaluateConfig, params).tutoring.judge_llm
    # null: the judges run on the ram2c drafter's backend
    judge = judge or load_section("ram2c", Ram2cConfig, params).llm
    specs["evaluate.tutoring.hts_judge"] = judge.spec_for("hts_judge")
    return specs


def test_the_default_params_run_every_role_on_the_top_level_backend() -> None:
    specs = every_role_spec(ROOT / "params.yaml")
    assert len(specs) == len(TAGGING_ROLES) + len(KGC_ROLES) + len(RAM2C_ROLES) + 2
    assert {(s.kind, s.model) for s in specs.values()} == {("transformers", "models/base/smollm2-135m-instruct")}
    caches = {load_section(s, m, ROOT / "params.yaml").llm.cache for s, (m, _) in TEAMS.items()}
    assert caches == {"data/cache/llm.sqlite"}


def test_switching_every_role_to_a_served_model_is_one_params_line(tmp_path: Path) -> None:
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("  default:"))  # the top-level llm comes first
    assert lines[index].startswith("  default: {kind: transformers")
    lines[index] = SERVED
    params = tmp_path / "params.yaml"
    params.write_text("\n".join(lines) + "\n", encoding="utf-8")
    changed = [a for a, b in zip(text.splitlines(), lines, strict=True) if a != b]
    assert len(changed) == 1
    specs = every_role_spec(params)
    assert {(s.kind, s.model, tuple(s.base_urls)) for s in specs.values()} == {
        ("openai", "Qwen2.5-7B-Instruct", ("http://127.0.0.1:8000/v1",))
    }
    raw = yaml.safe_load(params.read_text(encoding="utf-8"))
    assert not offline_default(raw, ["tagging", "kgc", "ram2c"])  # the report sees the switch too
    assert offline_default(yaml.safe_load(text), ["tagging", "kgc", "ram2c"])
    assert {s.kind for s in backend_specs(raw, "ram2c")} == {"openai"}


def test_the_served_profile_is_that_line_and_dvc_applies_it_the_same(tmp_path: Path) -> None:
    profile = load_profile("served", root=ROOT)
    assert (ROOT / "configs/profiles/served.yaml").read_text().count("\nllm:") == 1 and list(profile) == ["llm"]
    params = read_yaml(ROOT / "params.yaml")
    merged = apply_profile(params, profile)
    written = tmp_path / "merged" / "params.yaml"
    written.parent.mkdir()
    written.write_text(yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
    via_dvc = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", via_dvc)
    apply_overrides(via_dvc, set_flags(profile, params))  # what `dvc exp run -S ...` does with the flags
    assert read_yaml(via_dvc) == merged
    for path in (written, via_dvc):
        assert {s.kind for s in every_role_spec(path).values()} == {"openai"}


@pytest.mark.parametrize("name", ["paper", "smoke"])
def test_every_profile_applies_through_dvc_as_it_merges(tmp_path: Path, name: str) -> None:
    params = read_yaml(ROOT / "params.yaml")
    profile = load_profile(name, root=ROOT)
    via_dvc = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", via_dvc)
    apply_overrides(via_dvc, set_flags(profile, params))
    assert read_yaml(via_dvc) == apply_profile(params, profile)


def test_a_section_keeps_its_own_roles_default_and_cache() -> None:
    params = read_yaml(ROOT / "params.yaml")
    served = {"kind": "openai", "model": "served", "base_urls": ["http://h:8000/v1"]}
    params["llm"] = {"default": served, "cache": "a.sqlite"}
    judge = {"kind": "openai", "model": "gpt-4o", "base_urls": ["https://api.openai.com/v1"]}
    params["tagging"]["llm"] = {"roles": {"numerical_judge": judge}}
    params["kgc"]["llm"] = {"default": {"kind": "transformers", "model": "local"}, "cache": None}
    tagging = section_from_params(params, "tagging", TaggingConfig).llm
    assert tagging.spec_for("solver").model == "served" and tagging.spec_for("numerical_judge").model == "gpt-4o"
    assert tagging.cache == "a.sqlite"
    kgc = section_from_params(params, "kgc", KGCConfig).llm
    assert kgc.spec_for("ner_expert").model == "local" and kgc.cache is None
    assert params["tagging"]["llm"] == {"roles": params["tagging"]["llm"]["roles"]}  # the input is untouched


def test_an_optional_llm_inherits_only_when_given() -> None:
    params = {"llm": {"default": {"kind": "transformers", "model": "m"}}, "build_kb": {"sources": [
        {"name": "s", "kind": "safety", "path": "x"}]}, "evaluate": {"tutoring": {"judge_llm": {}}}}
    assert section_from_params(params, "build_kb", BuildKBConfig).quality.llm is None  # null: no rewrites
    judge = section_from_params(params, "evaluate", EvaluateConfig).tutoring.judge_llm
    assert judge.default.model == "m"
    assert section_from_params({**params, "evaluate": {}}, "evaluate", EvaluateConfig).tutoring.judge_llm is None


def test_the_top_level_llm_is_strict_and_errors_name_its_line(tmp_path: Path) -> None:
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    text = text.replace("\n  cache: data/cache/llm.sqlite ", "\n  cahce: x ", 1)
    params = tmp_path / "params.yaml"
    params.write_text(text, encoding="utf-8")
    line = text.splitlines().index(next(x for x in text.splitlines() if x.startswith("  cahce:"))) + 1
    expected = rf"params.yaml:{line}: llm.cahce: unknown key \(did you mean 'cache'\?\); remove it or use one of: "
    expected += "cache, default"
    with pytest.raises(ConfigError, match=expected):
        load_section("tagging", TaggingConfig, params)
    params.write_text(text.replace("  cahce: x", "  roles: {planner: {sampling: {n: 2}}}"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"llm.roles: unknown key"):
        load_section("kgc", KGCConfig, params)


def test_inherited_keys_count_as_params_keys() -> None:
    params = read_yaml(ROOT / "params.yaml")
    assert params_key_exists(params, "tagging.llm.default") and params_key_exists(params, "ram2c.llm.cache")
    assert params_key_exists(params, "tagging.llm.sampling.max_tokens")
    assert not params_key_exists(params, "tagging.llm.defualt") and not params_key_exists(params, "llm.roles")


def test_the_documented_real_run_blocks_are_valid_params() -> None:
    import re

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if b.startswith("llm:")]
    assert len(blocks) >= 5
    for block in blocks:
        merged = apply_profile(read_yaml(ROOT / "params.yaml"), block)
        for section, (model, _) in TEAMS.items():
            assert section_from_params(merged, section, model).llm.default.kind == block["llm"]["default"]["kind"]
