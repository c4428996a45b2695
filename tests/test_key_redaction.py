"""A key pasted where an environment variable's name belongs is refused without being echoed; values
that look like keys are redacted from the tracked config and metrics whatever their field name."""

import json

import pytest

from pipelines.config import ConfigError, validate_section
from pipelines.llm.config import LLMConfig
from pipelines.redaction import looks_like_key, redact_keys
from pipelines.stage import write_metrics
from pipelines.tracking import REDACTED, scrub

KEY = "sk-proj-Zx81aQ0dLm3nVb7Tt5Yy2Ww9Kk4Hh6Gg"


def _llm(**openai) -> dict:
    return {"default": {"kind": "openai", "model": "m", "base_urls": ["https://api.example.com/v1"], **openai}}


@pytest.mark.parametrize("value", [KEY, "Bearer abcdefgh12345678", "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3k"])
def test_a_key_as_api_key_env_is_refused_and_not_echoed(value):
    with pytest.raises(ConfigError) as info:
        validate_section(_llm(api_key_env=value), LLMConfig, section="llm")
    message = str(info.value)
    assert "llm.default.api_key_env" in message and "looks like an API key" in message
    assert value not in message and value.split()[-1] not in message


def test_api_key_env_must_be_a_variable_name():
    with pytest.raises(ConfigError, match="must be an environment variable's name"):
        validate_section(_llm(api_key_env="MY KEY"), LLMConfig, section="llm")
    cfg = validate_section(_llm(api_key_env="GLM_API_KEY"), LLMConfig, section="llm")
    assert cfg.default.api_key_env == "GLM_API_KEY"
    assert validate_section(_llm(api_key_env=None), LLMConfig, section="llm").default.api_key_env is None


def test_api_key_is_not_steered_to_api_key_env():
    with pytest.raises(ConfigError) as info:
        validate_section(_llm(api_key=KEY), LLMConfig, section="llm")
    message = str(info.value)
    assert "did you mean" not in message and "export it as an environment variable" in message
    assert KEY not in message


def test_key_looking_values_are_redacted_whatever_the_field(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    note = f"header Authorization: Bearer {KEY[3:]}"
    params = {"llm": {"api_key_env": KEY, "note": note, "model": "Qwen/Qwen2.5-7B"},
              "digest": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
    clean = scrub(params)
    assert clean["llm"]["api_key_env"] == REDACTED and clean["llm"]["note"] == "header Authorization: ***"
    assert clean["llm"]["model"] == "Qwen/Qwen2.5-7B" and clean["digest"] == params["digest"]  # not keys
    assert not looks_like_key("OPENAI_API_KEY") and redact_keys(f"x={KEY} y") == "x=*** y"


def test_metrics_files_redact_key_looking_values(tmp_path):
    write_metrics(tmp_path / "m.json", {"backend": {"key": KEY, "prompt_tokens": 12, "model": "gpt-4o-mini"}})
    data = json.loads((tmp_path / "m.json").read_text())
    assert data == {"backend": {"key": REDACTED, "prompt_tokens": 12, "model": "gpt-4o-mini"}}
