"""The parameter reference: every key of every ``params.yaml`` section, from the config models.

Each row is a key path, its type (with bounds), its default and the field's ``description``, walked
from the section's pydantic model (nested models, lists and mappings of them, and each kind of a
discriminated union, e.g. the LLM backends). ``docs/params.md`` is this module's output, and each
stage's ``--help`` lists its own sections the same way (:func:`help_epilog`)::

    python -m pipelines.params_doc --write docs/params.md   # regenerate the page
    python -m pipelines.params_doc --check docs/params.md   # exit 1 when the page is out of date
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from pipelines.io import atomic_open

PAGE = Path("docs/params.md")
COMMAND = f"python -m pipelines.params_doc --write {PAGE}"

SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("llm", "pipelines.llm.shared", "SharedLLMConfig"),
    ("prepare_models", "pipelines.models.prepare", "PrepareModelsConfig"),
    ("make_datasets", "pipelines.training.dataset_builder", "MakeDatasetsConfig"),
    ("train.<run>", "pipelines.training.config", "TrainConfig"),
    ("evaluate", "pipelines.evaluation.arms.config", "EvaluateConfig"),
    ("tagging", "pipelines.tagging.config", "TaggingConfig"),
    ("kgc", "pipelines.kgc.config", "KGCConfig"),
    ("build_kb", "pipelines.retrieval.config", "BuildKBConfig"),
    ("retrieval", "pipelines.retrieval.config", "RetrievalConfig"),
    ("ram2c", "pipelines.ram2c.config", "Ram2cConfig"),
    ("report", "pipelines.evaluation.report.config", "ReportConfig"),
)
"""(params key, module, model class) of every section a stage reads; ``train.<run>`` is ``train.sft``
and ``train.dpo``, one TrainConfig each."""


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    description: str


def section_models() -> list[tuple[str, type[BaseModel]]]:
    """``(params key, model)`` of every section in :data:`SECTIONS` (imported here: no import cycle)."""
    return [(key, getattr(importlib.import_module(module), name)) for key, module, name in SECTIONS]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _strip(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> ``X``."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> list[Any]:
    annotation = _strip(annotation)
    if get_origin(annotation) in (Union, types.UnionType):
        return [_strip(arg) for arg in get_args(annotation)]
    return [annotation]


def type_name(annotation: Any) -> str:
    """A short, YAML-minded name of a field's type: ``int``, ``a | b``, ``list[str]``, ``null``."""
    annotation = _strip(annotation)
    origin = get_origin(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return " | ".join(json.dumps(v) if isinstance(v, str) and v in ("no", "yes") else str(v)
                          for v in get_args(annotation))  # fmt: skip
    if origin in (Union, types.UnionType):
        return " | ".join(dict.fromkeys(type_name(arg) for arg in get_args(annotation)))
    if origin in (list, tuple, set, frozenset):
        args = [type_name(arg) for arg in get_args(annotation) if arg is not Ellipsis]
        return f"list[{', '.join(dict.fromkeys(args))}]"
    if origin is dict:
        key, value = get_args(annotation) or (Any, Any)
        return f"dict[{type_name(key)}, {type_name(value)}]"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(field: FieldInfo) -> str:
    marks = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "min_length": "length >=", "max_length": "length <="}
    found = [f"{marks[name]} {getattr(item, name)}" for item in field.metadata for name in marks
             if getattr(item, name, None) is not None]  # fmt: skip
    return f" ({', '.join(found)})" if found else ""


def _yaml(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "(keys below)"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if value in ("", "no", "yes") or ": " in value else value
    return json.dumps(value, ensure_ascii=False, default=str)


def default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        try:
            value = field.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    empty = isinstance(value, BaseModel) and not type(value).model_fields
    return _yaml(value.model_dump(mode="json") if empty else value)


def _kind(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("kind")
    args = get_args(_strip(field.annotation)) if field is not None else ()
    return str(args[0]) if len(args) == 1 else None


def _nested(annotation: Any, key: str) -> list[tuple[str, type[BaseModel]]]:
    """``(key prefix, model)`` of the models a field holds: itself (``key.``), list items (``key[].``),
    mapping values (``key.<name>.``), each kind of a union of several (``key[kind=openai].``)."""
    found: list[tuple[str, type[BaseModel]]] = []
    members = [m for m in _members(annotation) if m is not type(None)]
    for member in members:
        origin = get_origin(member)
        if _is_model(member):
            kind = _kind(member) if len([m for m in members if _is_model(m)]) > 1 else None
            found.append((f"{key}[kind={kind}]." if kind else f"{key}.", member))
        elif origin in (list, tuple):
            found += [(f"{key}[].", m) for arg in get_args(member) for m in _members(arg) if _is_model(m)]
        elif origin is dict and get_args(member):
            found += [(f"{key}.<name>.", m) for m in _members(get_args(member)[1]) if _is_model(m)]
    return found


def model_rows(model: type[BaseModel], prefix: str, seen: dict[type, str] | None = None) -> list[Row]:
    """The rows of ``model``'s fields under ``prefix`` (e.g. ``"tagging."``), nested models expanded
    once: a model already expanded at another key (in ``seen``) is a pointer to it."""
    seen = {} if seen is None else seen
    rows: list[Row] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        kind = type_name(field.annotation) + _bounds(field)
        rows.append(Row(key, kind, default_text(field), field.description or ""))
        for sub_prefix, sub in _nested(field.annotation, key):
            if sub in seen:
                rows.append(Row(sub_prefix + "*", sub.__name__, "", f"the keys of `{seen[sub]}*`"))
                continue
            seen[sub] = sub_prefix
            rows += model_rows(sub, sub_prefix, seen)
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def render_page() -> str:
    """The Markdown of ``docs/params.md``."""
    out = [
        "# Parameter reference",
        "",
        "<!-- Generated by pipelines/params_doc.py from the config models' field descriptions; do not edit. -->",
        f"<!-- Regenerate: {COMMAND} -->",
        "",
        "Every key a stage reads from `params.yaml`, from the typed config models (an unknown key or a bad",
        "value stops the stage with the file, line and fix: [configuration](configuration.md)). `key[]` is",
        "an item of a list, `key.<name>` a value of a mapping, `key[kind=x]` the keys of that kind of a",
        "backend; `*` rows point to keys documented at another path. Each stage's `--help` lists its own",
        "sections the same way. Sections' `llm` blocks inherit `default` and `cache` from the top-level `llm`;",
        "`train.<run>` is `train.sft` and `train.dpo`, each a whole set of these keys.",
        "",
    ]
    seen: dict[type, str] = {}
    for key, model in section_models():
        summary = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())
        out += [f"## `{key}`", ""] + ([summary, ""] if summary else [])
        out += ["| key | type | default | description |", "|---|---|---|---|"]
        for row in model_rows(model, f"{key}.", seen):
            code = row.key.replace("|", "\\|")
            out.append(f"| `{code}` | {_cell(row.type)} | {_cell(row.default)} | {_cell(row.description)} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def help_epilog(sections: dict[str, type[BaseModel]], *, width: int = 100) -> str:
    """The ``--help`` text of a stage's params sections: each key, its type, default and description."""
    lines = [f"params keys (full reference: {PAGE}):"]
    for section, model in sections.items():
        for row in model_rows(model, f"{section}."):
            default = f", default {row.default}" if row.default and row.default != "required" else f", {row.default}"
            lines.append(f"  {row.key} ({row.type}{default})")
            if row.description:
                lines += textwrap.wrap(row.description, width=width, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


def all_models() -> list[type[BaseModel]]:
    """Every model the sections reach, and every model defined in a ``pipelines/**/config.py``."""
    found: dict[type[BaseModel], None] = {}

    def visit(model: type[BaseModel]) -> None:
        if model in found:
            return
        found[model] = None
        for name, field in model.model_fields.items():
            for _, sub in _nested(field.annotation, name):
                visit(sub)

    for _, model in section_models():
        visit(model)
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("config.py")):
        module = importlib.import_module(".".join(("pipelines", *path.relative_to(root).with_suffix("").parts)))
        for value in vars(module).values():
            if _is_model(value) and value.__module__ == module.__name__:
                visit(value)
    return list(found)


def missing_descriptions(models: list[type[BaseModel]] | None = None) -> list[str]:
    """``module.Class.field`` of every field of ``models`` (default: :func:`all_models`) without a description."""
    return [f"{m.__module__}.{m.__qualname__}.{name}" for m in (all_models() if models is None else models)
            for name, field in m.model_fields.items() if not (field.description or "").strip()]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.params_doc", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="PATH", help=f"write the page there (e.g. {PAGE})")
    group.add_argument("--check", metavar="PATH", help="exit 1 unless the page there is current")
    args = parser.parse_args(argv)
    page = render_page()
    if args.write:
        with atomic_open(args.write) as handle:
            handle.write(page)
    elif args.check:
        path = Path(args.check)
        if not path.exists() or path.read_text(encoding="utf-8") != page:
            print(f"{path} is out of date; run: python -m pipelines.params_doc --write {path}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
