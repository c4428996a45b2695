"""The top-level ``llm:`` of params.yaml: the backend every section's agent roles run on.

Five sections have an ``llm`` block (``tagging``, ``kgc``, ``ram2c``, ``build_kb.quality``,
``evaluate.tutoring.judge_llm``). Each inherits ``default`` (the backend spec) and ``cache`` from
the top-level one unless it sets them itself, so switching every role to a served model is one
line::

    llm:
      default: {kind: openai, model: Qwen2.5-7B-Instruct, base_urls: [http://127.0.0.1:8000/v1], api_key_env: null}
      cache: data/cache/llm.sqlite

A section keeps what is its own: ``roles`` (per-role backends and sampling) and ``sampling``. A
required ``llm`` left out of a section is the top-level one whole; an optional one (``null`` by
default: ``build_kb.quality.llm``, ``evaluate.tutoring.judge_llm``) stays null unless it is
given, e.g. as ``{}`` (the top-level one as it is).
"""

from __future__ import annotations

import copy
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, Field

from pipelines.llm.config import BackendConfig, LLMConfig
from pipelines.strict import StrictModel

SECTION = "llm"
INHERITED = ("default", "cache")


class SharedLLMConfig(StrictModel):
    """The top-level ``llm`` section: what every section's ``llm`` inherits (see the module docstring).
    Roles and sampling belong to the sections (``tagging.llm.roles``, ``kgc.llm.sampling`` ...)."""

    default: BackendConfig = Field(
        description="backend spec of every role in every section (kind: transformers | openai | vllm | scripted; "
        "keys below), unless a section's llm sets its own",
    )
    cache: str | None = Field(
        "data/cache/llm.sqlite",
        description="request cache: a rerun repeats no finished call (null: off); a section's llm.cache overrides it",
    )


def _llm_field(annotation: Any) -> tuple[bool, bool]:
    """(is an LLMConfig field, is optional)."""
    if annotation is LLMConfig:
        return True, False
    if get_origin(annotation) in (Union, types.UnionType):
        args = get_args(annotation)
        if LLMConfig in args:
            return True, type(None) in args
    return False, False


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def llm_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], bool]]:
    """Where ``model`` holds an ``LLMConfig``: ``[(path, optional)]``, through nested models."""
    found: list[tuple[tuple[str, ...], bool]] = []
    for name, field in model.model_fields.items():
        is_llm, optional = _llm_field(field.annotation)
        if is_llm:
            found.append((prefix + (name,), optional))
        elif (nested := _nested_model(field.annotation)) is not None:
            found.extend(llm_paths(nested, prefix + (name,)))
    return found


def inherit(local: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """A section's ``llm`` mapping with the keys of :data:`INHERITED` it lacks taken from ``shared``."""
    merged = copy.deepcopy(local)
    for key in INHERITED:
        if key not in merged and key in shared:
            merged[key] = copy.deepcopy(shared[key])
    return merged


def with_shared_llm(data: Any, model: type[BaseModel], shared: dict[str, Any] | None) -> Any:
    """``data`` (one section, as read) with the top-level ``llm`` laid under each of its llm blocks."""
    if shared is None or not isinstance(data, dict):
        return data
    data = copy.deepcopy(data)
    for path, optional in llm_paths(model):
        node = data
        for part in path[:-1]:
            if part not in node and optional:  # nothing to inherit below a part left at its default
                break
            child = node.setdefault(part, {})
            if not isinstance(child, dict):  # a bad value: validation reports it
                break
            node = child
        else:
            key = path[-1]
            if key not in node:
                if not optional:
                    node[key] = inherit({}, shared)
            elif isinstance(node[key], dict):
                node[key] = inherit(node[key], shared)
    return data


def shared_section(params: dict[str, Any]) -> dict[str, Any] | None:
    """The raw top-level ``llm`` mapping of a params file (None when it has none)."""
    value = params.get(SECTION)
    return value if isinstance(value, dict) else None
