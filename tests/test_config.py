"""Strict config: unknown keys and bad values name the file, the line and the fix."""

from typing import Literal

import pytest

from pipelines.config import ConfigError, StrictModel, load_section


class Inner(StrictModel):
    policy: Literal["no", "semantic"] = "no"
    rounds: int = 3


class Section(StrictModel):
    name: str
    inner: Inner = Inner()


def write(tmp_path, text):
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_section_loads_typed_values(tmp_path):
    path = write(tmp_path, "stage:\n  name: demo\n  inner:\n    rounds: 5\n")
    cfg = load_section("stage", Section, path)
    assert cfg.name == "demo" and cfg.inner.rounds == 5 and cfg.inner.policy == "no"


def test_unknown_key_names_file_line_and_allowed_keys(tmp_path):
    path = write(tmp_path, "stage:\n  name: demo\n  inner:\n    rounds: 5\n    polcy: no\n")
    with pytest.raises(ConfigError) as info:
        load_section("stage", Section, path)
    message = str(info.value)
    assert f"{path}:5: stage.inner.polcy: unknown key" in message
    assert "policy, rounds" in message


def test_bad_value_names_line_and_value(tmp_path):
    path = write(tmp_path, "other: 1\nstage:\n  name: demo\n  inner:\n    policy: maybe\n")
    with pytest.raises(ConfigError) as info:
        load_section("stage", Section, path)
    assert f"{path}:5: stage.inner.policy" in str(info.value)
    assert "'maybe'" in str(info.value)


def test_missing_key_and_missing_section(tmp_path):
    path = write(tmp_path, "stage:\n  inner: {}\n")
    with pytest.raises(ConfigError, match="stage.name: required key is missing"):
        load_section("stage", Section, path)
    with pytest.raises(ConfigError, match="section 'nope' is missing"):
        load_section("nope", Section, path)


def test_yaml_syntax_error_names_line(tmp_path):
    path = write(tmp_path, "stage:\n  name: [unclosed\n")
    with pytest.raises(ConfigError, match=r"params.yaml:\d+: invalid YAML"):
        load_section("stage", Section, path)


def test_distinct_names_the_repeated_values_and_why():
    from pipelines.config import distinct

    assert distinct("names", ["a", "b"]) == ["a", "b"]
    expected = r"baselines must be distinct \(one row each\), got \['x', 'y', 'x'\]; repeated: x"
    with pytest.raises(ValueError, match=expected):
        distinct("baselines", ["x", "y", "x"], why="one row each")


def test_a_common_alias_or_a_typo_gets_a_did_you_mean(tmp_path):
    from pipelines.llm.config import LLMConfig

    class Section(StrictModel):
        llm: LLMConfig
        concurrency: int = 1

    path = write(tmp_path, "s:\n  concurency: 4\n  llm:\n    default: {kind: openai, model: m, base_url: 'http://h/v1'}\n")
    with pytest.raises(ConfigError) as err:
        load_section("s", Section, path)
    message = str(err.value)
    assert "params.yaml:2: s.concurency: unknown key (did you mean 'concurrency'?)" in message
    # the union's tag ("openai") is not in the path, and the allowed keys are the openai backend's
    assert "params.yaml:4: s.llm.default.base_url: unknown key (did you mean 'base_urls'?)" in message
    assert "use one of: api_key_env," in message and ".openai." not in message


def test_a_bad_role_name_says_which_and_does_not_dump_the_llm_section(tmp_path):
    from pipelines.tagging.config import TaggingConfig

    text = "tagging:\n  llm:\n    default: {kind: transformers, model: m}\n    roles: {planer: {sampling: {n: 2}}}\n"
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_section("tagging", TaggingConfig, path)
    message = str(err.value)
    assert "unknown role 'planer' in llm.roles (did you mean 'planner'?); valid roles: planner," in message
    assert "kind" not in message and "got {" not in message  # the section itself is not repeated back


def test_a_role_entry_without_kind_names_its_own_path(tmp_path):
    from pipelines.tagging.config import TaggingConfig

    path = write(tmp_path, "tagging:\n  llm:\n    default: {kind: transformers, model: m}\n    roles: {solver: {}}\n")
    with pytest.raises(ConfigError, match=r"params.yaml:4: tagging.llm.roles.solver.sampling: required key is missing"):
        load_section("tagging", TaggingConfig, path)


def test_yaml_1_2_booleans_with_libyaml_where_pyyaml_has_it(tmp_path):
    import yaml

    from pipelines.config import Yaml12Loader, read_yaml

    path = write(tmp_path, "stage:\n  name: no\n  a: yes\n  b: on\n  c: true\n  d: False\n")
    assert read_yaml(path) == {"stage": {"name": "no", "a": "yes", "b": "on", "c": True, "d": False}}
    assert issubclass(Yaml12Loader, yaml.CSafeLoader) == yaml.__with_libyaml__  # the C parser: 5 ms, not 43
