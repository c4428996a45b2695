"""Recognising secrets by their look, whatever the field that holds them: API keys with a known
prefix (``sk-``, ``hf_``, ``ghp_``, ``AKIA``...), ``Bearer <token>``, and long random-looking tokens
(32+ letters and digits mixing upper case, lower case and digits; hex digests and paths are not keys).
:func:`redact_keys` replaces them in text; :func:`looks_like_key` says whether a value is one; the
:data:`EnvVarName` type refuses a key pasted where an environment variable's name belongs, without
echoing it."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

REDACTED = "***"

_PREFIXED = (
    r"sk-[A-Za-z0-9_\-]{16,}|sk_(?:live|test)_[A-Za-z0-9]{16,}|rk_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-]{20,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{30,}"
)
_KEY = re.compile(rf"(?<![A-Za-z0-9_\-])(?:{_PREFIXED})|(?i:\bbearer)\s+[A-Za-z0-9_\-.=+/~]{{8,}}")
_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-+/=.])[A-Za-z0-9_\-+=]{32,}(?![A-Za-z0-9_\-+/=.])")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _random_looking(token: str) -> bool:
    return any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)


def redact_keys(text: str) -> str:
    """``text`` with every key-looking part replaced by ``***``."""
    text = _KEY.sub(REDACTED, text)
    return _TOKEN.sub(lambda m: REDACTED if _random_looking(m.group()) else m.group(), text)


def looks_like_key(text: str) -> bool:
    """True when ``text`` holds an API key, a bearer token or a long random-looking token."""
    return redact_keys(text) != text


def _env_name(value: str) -> str:
    if looks_like_key(value):
        raise ValueError(
            "this looks like an API key itself (not shown); never put a key in params.yaml: export it as an "
            "environment variable (e.g. export OPENAI_API_KEY=...) and give that variable's name here"
        )
    if not ENV_NAME.match(value):
        raise ValueError("must be an environment variable's name (letters, digits and _, not starting with a digit)")
    return value


EnvVarName = Annotated[str, AfterValidator(_env_name)]
"""A field that names an environment variable: a pasted key is refused without being echoed."""
