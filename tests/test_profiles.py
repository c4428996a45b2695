"""Params profiles: laid over params.yaml key by key, typos refused, and the ``-S`` flags they give
parse back (with the override grammar ``dvc exp run`` uses) to the same values."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from pipelines.config import ConfigError, read_yaml, section_from_params
from pipelines.profiles import apply_profile, exp_run_command, load_profile, set_flags
from pipelines.tagging.config import TaggingConfig

ROOT = Path(__file__).resolve().parents[1]


def test_dicts_merge_and_other_values_replace() -> None:
    params = {"a": {"b": 1, "c": [1, 2], "d": {"e": "x"}}, "f": True}
    merged = apply_profile(params, {"a": {"c": [3], "d": {"e": "y"}}})
    assert merged == {"a": {"b": 1, "c": [3], "d": {"e": "y"}}, "f": True}
    assert params["a"]["c"] == [1, 2]  # the input is untouched


def test_an_empty_mapping_in_params_takes_the_profile_mapping_whole() -> None:
    merged = apply_profile({"llm": {"roles": {}, "cache": "x"}}, {"llm": {"roles": {"expert": {"kind": "openai"}}}})
    assert merged == {"llm": {"roles": {"expert": {"kind": "openai"}}, "cache": "x"}}
    backend = {"kind": "openai", "model": "m", "base_urls": ["http://h/v1"]}
    local = {"kind": "transformers", "model": "x", "max_batch_size": 16}
    merged = apply_profile({"default": local}, {"default": backend})
    assert merged == {"default": backend}  # a backend spec is replaced, not merged key by key


def test_a_key_missing_from_params_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"profile key 'a.cc' is not in params.yaml"):
        apply_profile({"a": {"c": 1}}, {"a": {"cc": 2}})


def test_flags_parse_back_to_the_profile_values() -> None:
    profile = {
        "kgc": {"datasets": [{"name": "conllpp", "files": ["../shared/x y.txt"], "sample": 1}], "shots": [0, 1]},
        "ram2c": {"language": "zh", "one": True, "cap": None, "share": 0.5, "quoted": "it's", "num_like": "13"},
    }
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(set_flags(profile))}
    assert parsed == {
        "kgc.datasets": profile["kgc"]["datasets"],
        "kgc.shots": [0, 1],
        "ram2c.language": "zh",
        "ram2c.one": True,
        "ram2c.cap": None,
        "ram2c.share": 0.5,
        "ram2c.quoted": "it's",
        "ram2c.num_like": "13",
    }
    assert exp_run_command({"a": {"b": 2}}, name="x") == ["dvc", "exp", "run", "-n", "x", "-S", "a.b=2"]


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "configs" / "profiles").glob("*.yaml")))
def test_every_profile_is_valid_for_every_stage(name: str) -> None:
    from pipelines.evaluation.arms.config import EvaluateConfig
    from pipelines.kgc.config import KGCConfig
    from pipelines.ram2c.config import Ram2cConfig
    from pipelines.retrieval.config import BuildKBConfig, RetrievalConfig
    from pipelines.tagging.config import TaggingConfig
    from pipelines.training.config import TrainConfig

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    merged = apply_profile(params, load_profile(name, root=ROOT))
    models = {"build_kb": BuildKBConfig, "retrieval": RetrievalConfig, "tagging": TaggingConfig, "kgc": KGCConfig,
              "ram2c": Ram2cConfig, "evaluate": EvaluateConfig}
    for section, model in models.items():
        section_from_params(merged, section, model, source=f"{name} profile")
    for method in ("sft", "dpo"):
        section_from_params(merged, f"train.{method}", TrainConfig, source=f"{name} profile")
    if name == "smoke":
        assert merged["train"]["sft"]["schedule"]["max_steps"] == 1
        dpo = merged["train"]["dpo"]["schedule"]  # DPO: updates at the peak rate, two losses logged after them
        assert (dpo["max_steps"], dpo["warmup_ratio"], dpo["logging_steps"]) == (3, 0.0, 1)
        assert merged["tagging"]["data"]["limit"] == 2 == merged["evaluate"]["tagging"]["items"]
        assert merged["ram2c"]["dialogues"] == 2


def test_write_keeps_the_comments_and_changes_only_the_profile_keys(tmp_path: Path) -> None:
    """Issue 37.4: ``--write`` rewrote params.yaml through yaml.safe_dump, dropping every comment."""
    from pipelines.profiles import main

    written = tmp_path / "params.yaml"
    assert main(["served", "--params", str(ROOT / "params.yaml"), "--write", str(written)]) == 0
    before = (ROOT / "params.yaml").read_text(encoding="utf-8").splitlines()
    after = written.read_text(encoding="utf-8").splitlines()
    assert len(after) == len(before)
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert len(changed) == 1  # only llm.default, its comment kept
    old, new = changed[0]
    spec = "{kind: openai, model: Qwen2.5-7B-Instruct, base_urls: [http://127.0.0.1:8000/v1], api_key_env: null}"
    assert old.startswith("  default: {kind: transformers") and new.startswith(f"  default: {spec}")
    assert "# up to 24 rows decoded together" in new
    served = yaml.safe_load((ROOT / "configs/profiles/served.yaml").read_text(encoding="utf-8"))
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    assert yaml.safe_load(written.read_text(encoding="utf-8")) == apply_profile(params, served)


def test_write_keeps_yes_and_no_strings_that_dvc_left_unquoted(tmp_path: Path) -> None:
    """``dvc exp run -S`` rewrites params.yaml with ruamel (YAML 1.2) and leaves ``yes``/``no`` unquoted;
    read as YAML 1.1 they became booleans, written back as ``true``/``false``, and the tagging stage
    then refused its own labels."""
    from pipelines.profiles import main

    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    quoted = 'positive_labels: ["1", "yes", "true", "y", "是"]'
    assert quoted in text
    rewritten = tmp_path / "params.yaml"
    rewritten.write_text(text.replace(quoted, 'positive_labels: ["1", yes, "true", "y", "是"]'), encoding="utf-8")
    written = tmp_path / "smoke.yaml"
    assert main(["smoke", "--params", str(rewritten), "--write", str(written)]) == 0
    labels = read_yaml(written)["tagging"]["data"]["positive_labels"]
    assert labels == ["1", "yes", "true", "y", "是"]
    assert section_from_params(read_yaml(written), "tagging", TaggingConfig).data.positive_labels == labels
