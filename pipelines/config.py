"""Strict configuration: one ``params.yaml`` section read into a typed pydantic model.

Every stage calls :func:`load_section` with the section name and its model class. Unknown keys
and bad values raise :class:`ConfigError`, whose message names the file, the line of the key and
what to change, e.g.::

    params.yaml:42: tagging.team.failure_policy: Input should be 'no' or 'semantic'
      (got 'maybe'). Fix the value in params.yaml or override it with `dvc exp run -S ...`.
"""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from pipelines.llm.shared import SECTION, SharedLLMConfig, llm_paths, shared_section, with_shared_llm
from pipelines.redaction import looks_like_key
from pipelines.strict import ALIASES, ConfigError, StrictModel, did_you_mean, distinct

__all__ = [
    "ALIASES", "DEFAULT_PARAMS", "ConfigError", "StrictModel", "did_you_mean", "distinct", "load_section",
    "params_key_exists", "read_yaml", "section_from_params", "validate_section",
]  # the strict primitives re-exported: most config models import StrictModel from here

T = TypeVar("T", bound=BaseModel)

DEFAULT_PARAMS = Path("params.yaml")


def _key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Map every mapping key path in a YAML document to its 1-based line number."""
    lines: dict[tuple[str, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key_path = path + (str(key_node.value),)
                lines[key_path] = key_node.start_mark.line + 1
                walk(value_node, key_path)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines[path + (str(index),)] = item.start_mark.line + 1
                walk(item, path + (str(index),))

    root = yaml.compose(text)
    if root is not None:
        walk(root, ())
    return lines


def _locate(lines: dict[tuple[str, ...], int], path: tuple[str, ...]) -> int | None:
    """Line of the deepest existing prefix of ``path`` (a missing key points at its parent)."""
    for cut in range(len(path), 0, -1):
        if path[:cut] in lines:
            return lines[path[:cut]]
    return None


class Yaml12Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader with YAML 1.2 booleans (only ``true`` / ``false``): ``yes``, ``no``,
    ``on``, ``off`` stay strings. ``dvc exp run -S`` rewrites params.yaml with ruamel (YAML 1.2),
    which writes the string ``"no"`` unquoted; read as YAML 1.1 it would turn into ``False``.
    libyaml's parser where PyYAML was built with it (the same mapping; params.yaml in 5 ms instead of
    43: every stage and shard process reads it at start), the pure-Python one otherwise."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; a syntax error becomes a :class:`ConfigError` naming file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: file not found; run from the project root or pass --params") from exc
    try:
        data = yaml.load(text, Loader=Yaml12Loader) or {}  # a SafeLoader (YAML 1.2 booleans)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML ({exc}); fix the syntax") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level")
    return data


def _shown(value: Any) -> str:
    """A bad value as an error shows it: a whole mapping or list is left out (it is in the file)."""
    if isinstance(value, dict | list):
        return ""
    if isinstance(value, str) and looks_like_key(value):
        return " (a value that looks like an API key; not shown)"
    text = repr(value)
    return f" (got {text if len(text) <= 120 else text[:117] + '...'})"


def validate_section(
    data: Any, model: type[T], *, section: str, source: str = "params.yaml", text: str | None = None
) -> T:
    """Validate ``data`` as ``model``; on failure raise one ConfigError listing every problem."""
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        lines = _key_lines(text) if text else {}
        problems = []
        for err in exc.errors():
            loc, fields = _resolve_loc(model, tuple(str(part) for part in err["loc"]))
            dotted = ".".join((section,) + loc)
            line = _locate(lines, tuple(section.split(".")) + loc)
            where = f"{source}:{line}" if line else source
            if err["type"] == "extra_forbidden":
                allowed = sorted(fields or [])
                suggestion = did_you_mean(loc[-1], allowed)
                hint = f"unknown key{suggestion}; remove it or use one of: {', '.join(allowed) or 'none'}"
            elif err["type"] == "missing":
                hint = "required key is missing; add it"
            else:
                hint = f"{err['msg']}{_shown(err.get('input'))}; fix the value"
            problems.append(f"{where}: {dotted}: {hint}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(dict.fromkeys(problems))) from None


def _union_members(annotation: Any) -> list[tuple[str | None, Any]]:
    """``(tag, member)`` of a (possibly ``Annotated``, discriminated) union; [] for anything else."""
    if getattr(annotation, "__metadata__", None) is not None:  # Annotated[X, ...]
        return _union_members(annotation.__args__[0])
    if get_origin(annotation) not in (Union, types.UnionType):
        return []
    members = []
    for arg in get_args(annotation):
        tag = next((getattr(m, "tag", None) for m in getattr(arg, "__metadata__", ()) if hasattr(m, "tag")), None)
        member = arg.__args__[0] if getattr(arg, "__metadata__", None) is not None else arg
        members.append((tag or _kind_of(member), member))
    return members


def _kind_of(member: Any) -> str | None:
    field = getattr(member, "model_fields", {}).get("kind")
    args = get_args(field.annotation) if field is not None else ()
    return str(args[0]) if len(args) == 1 else None


def _resolve_loc(model: type[BaseModel], loc: tuple[str, ...]) -> tuple[tuple[str, ...], list[str] | None]:
    """``loc`` without pydantic's union tags (``llm.default.openai.base_url`` ->
    ``llm.default.base_url``), and the field names of the model that holds its last key."""
    current: Any = model
    clean: list[str] = []
    for part in loc:
        members = _union_members(current)
        if members:
            tagged = [m for tag, m in members if part in (tag, getattr(m, "__name__", None))]
            if tagged:  # the tag pydantic puts in the path names the member
                current = tagged[0]
                continue
            models = [m for _, m in members if isinstance(m, type) and issubclass(m, BaseModel)]
            current = models[0] if len(models) == 1 else None
        clean.append(part)
        holder = current
        model_fields = getattr(current, "model_fields", None)
        if model_fields is not None:
            current = model_fields[part].annotation if part in model_fields else None
        else:
            args = get_args(current)
            current = args[-1] if args else None  # dict[str, X] / list[X]: the item type
    fields = list(getattr(holder, "model_fields", {})) if clean else list(model.model_fields)
    return tuple(clean), fields or None


def section_from_params(
    params: dict[str, Any], section: str, model: type[T], *, source: str = "params.yaml", text: str | None = None
) -> T:
    """``section`` (dotted for nesting, e.g. ``train.sft``) of a params mapping as ``model``; its llm
    blocks inherit the top-level ``llm`` (:mod:`pipelines.llm.shared`), which is checked first."""
    node: Any = params
    for part in section.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"{source}: section '{section}' is missing; add it (see docs/configuration.md)")
        node = node[part]
    if llm_paths(model) and (shared := shared_section(params)) is not None:
        validate_section(shared, SharedLLMConfig, section=SECTION, source=source, text=text)
        node = with_shared_llm(node, model, shared)
    return validate_section(node, model, section=section, source=source, text=text)


def load_section(section: str, model: type[T], params_path: Path | str = DEFAULT_PARAMS) -> T:
    """Read ``section`` (dotted for nesting, e.g. ``train.sft``) of a params file into ``model``."""
    path = Path(params_path)
    return section_from_params(read_yaml(path), section, model, source=str(path), text=path.read_text("utf-8"))


def params_key_exists(params: dict[str, Any], key: str) -> bool:
    """Whether the dotted ``key`` (``tagging.llm.sampling.max_tokens``) names a value in ``params``;
    a key of a section's llm block that it inherits (``tagging.llm.default``) exists when the
    top-level ``llm`` has it."""
    parts = key.split(".")
    node: Any = params
    for index, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            inherited = index > 1 and parts[index - 1] == "llm" and parts[0] != "llm"
            return inherited and params_key_exists(params, ".".join(["llm", *parts[index:]]))
        node = node[part]
    return True
