"""Strict-config primitives, the ground floor every config model stands on: :class:`StrictModel`,
:class:`ConfigError`, :func:`distinct` and :func:`did_you_mean`. Imports nothing of the project, so
any layer may use it (reading a params file is :mod:`pipelines.config`)."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


class ConfigError(ValueError):
    """A params file that cannot be used; the message says where and how to fix it."""


def distinct(what: str, values: list[Any], *, why: str = "") -> list[Any]:
    """``values`` unchanged, or a ValueError naming ``what`` (and ``why`` it matters) when one repeats."""
    if len(set(values)) != len(values):
        repeated = sorted({str(v) for v in values if values.count(v) > 1})
        reason = f" ({why})" if why else ""
        raise ValueError(f"{what} must be distinct{reason}, got {values}; repeated: {', '.join(repeated)}")
    return values


ALIASES = {
    "base_url": "base_urls",
    "api_base": "base_urls",
    "url": "base_urls",
    "urls": "base_urls",
    "api_key": "api_key_env",
    "model_name": "model",
    "model_path": "model",
    "max_new_tokens": "max_tokens",
    "concurrent": "concurrency",
}
"""Names other tools use for a key of ours: an unknown key that is one of them gets a "did you mean"."""


def did_you_mean(key: str, allowed: list[str]) -> str:
    """`` (did you mean 'x'?)`` for an unknown ``key`` close to, or a common alias of, an allowed key."""
    if key == "api_key" and "api_key_env" in allowed:  # not "did you mean": that invites pasting the key there
        return (" (a key never goes in params.yaml: export it as an environment variable and give the variable's "
                "name as api_key_env, default OPENAI_API_KEY)")
    alias = ALIASES.get(key)
    if alias in allowed:
        return f" (did you mean {alias!r}?)"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
