"""Params profiles: a partial params file (``configs/profiles/<name>.yaml``) laid over ``params.yaml``.

A profile names only the keys it changes; every key must exist in the params it is applied to
(a typo is an error naming the key), dicts merge key by key and any other value (lists included)
replaces the value it names. An empty mapping in params (``llm.roles: {}``), a backend spec (a
mapping with ``kind``, e.g. ``llm.default``) and a training run (a mapping with ``method``) take the
profile's mapping whole. A training preset (``configs/training/<preset>.yaml``, one run under
``train:``) is a profile too: it becomes ``train.<method>`` whole (:mod:`pipelines.training.presets`).
Two ways to use one::

    python -m pipelines.profiles smoke --run             # dvc exp run -S key=value ... (one experiment)
    python -m pipelines.profiles smoke --write DIR/params.yaml   # the merged params file (CI's smoke run)
    python -m pipelines.profiles smoke served --print    # several profiles, laid over in order
    python -m pipelines.profiles paper configs/training/ram2c_dpo_qwen1.5-4b.yaml --write params.yaml

``--print`` shows the ``dvc exp run`` command instead of running it. ``--write`` keeps the params
file's comments, key order and quoting: only the keys the profiles change differ (ruamel.yaml).
``served`` is the one-line backend switch: the top-level ``llm`` every section inherits, on an OpenAI-compatible server.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from pipelines.config import ConfigError, read_yaml
from pipelines.io import atomic_open
from pipelines.training.presets import is_preset, is_run_section, preset_profile

PROFILES_DIR = Path("configs/profiles")
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./\-]*$")  # strings the override grammar reads unquoted


def load_profile(name: str, *, root: Path | str = ".") -> dict[str, Any]:
    """The profile ``name`` (a file under ``configs/profiles/`` or a path to a YAML file)."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else Path(root) / PROFILES_DIR / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (Path(root) / PROFILES_DIR).glob("*.yaml"))
        raise ConfigError(f"profile {name!r} not found at {path}; known profiles: {', '.join(known) or 'none'}")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a profile is a mapping of params sections to the values it changes")
    if is_preset(data):  # a training preset: the whole train.<method> section
        return preset_profile(data, source=str(path))
    return data


def _replaces_whole(value: Mapping[str, Any]) -> bool:
    """A backend spec (``kind``) or a training run (``method``): laid over as one value, never merged."""
    return "kind" in value or is_run_section(value)


def apply_profile(
    params: Mapping[str, Any], profile: Mapping[str, Any], *, where: str = "", strict: bool = True
) -> dict[str, Any]:
    """``params`` with ``profile`` laid over it (a new dict; inputs untouched). ``strict=False``
    admits keys ``params`` lacks (two profiles combined before they meet params.yaml)."""
    merged = copy.deepcopy(dict(params))
    for key, value in profile.items():
        dotted = f"{where}{key}"
        if key not in merged and strict:
            known = ", ".join(merged)
            raise ConfigError(f"profile key {dotted!r} is not in params.yaml; fix the profile (keys there: {known})")
        target = merged.get(key)
        if isinstance(value, Mapping) and isinstance(target, Mapping) and target and not _replaces_whole(value):
            merged[key] = apply_profile(target, value, where=f"{dotted}.", strict=strict)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def combine_profiles(profiles: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One profile with ``profiles`` laid over each other in order (a later one wins)."""
    combined: dict[str, Any] = {}
    for profile in profiles:
        combined = apply_profile(combined, profile, strict=False)
    return combined


def _hydra_value(value: Any) -> str:
    """A value in the override grammar ``dvc exp run -S`` parses (strings always quoted)."""
    if isinstance(value, str):
        if _PLAIN.match(value) and yaml.safe_load(value) == value:
            return value
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {_hydra_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_hydra_value(item) for item in value) + "]"
    return json.dumps(value)


_ABSENT = object()


def set_flags(profile: Mapping[str, Any], params: Mapping[str, Any] | None = None, *, where: str = "") -> list[str]:
    """``key.path=value`` overrides for ``dvc exp run -S``, one per leaf of the profile.

    With ``params`` (the file DVC will change) the flags give what :func:`apply_profile` gives:
    a key params lacks, or an empty mapping there, is added (``+key=value``); a mapping that
    replaces one whole (a backend spec, which DVC would otherwise merge key by key, keeping e.g. a
    transformers ``max_batch_size`` in an openai spec) is deleted and added (``~key``, ``+key=...``).
    """
    flags: list[str] = []
    for key, value in profile.items():
        dotted = f"{where}{key}"
        target = params.get(key, _ABSENT) if isinstance(params, Mapping) else None
        mapping = isinstance(value, Mapping) and value
        if params is not None and (target is _ABSENT or (isinstance(target, Mapping) and not target)):
            flags.append(f"+{dotted}={_hydra_value(value)}")
        elif mapping and isinstance(target, Mapping) and _replaces_whole(value):
            flags += [f"~{dotted}", f"+{dotted}={_hydra_value(value)}"]
        elif mapping:
            flags.extend(set_flags(value, target if isinstance(target, Mapping) else None, where=f"{dotted}."))
        else:
            flags.append(f"{dotted}={_hydra_value(value)}")
    return flags


def exp_run_command(
    profile: Mapping[str, Any], *, name: str | None = None, params: Mapping[str, Any] | None = None
) -> list[str]:
    """The ``dvc exp run`` argv that runs one experiment with ``profile`` (laid over ``params``)."""
    command = ["dvc", "exp", "run"] + (["-n", name] if name else [])
    for flag in set_flags(profile, params):
        command += ["-S", flag]
    return command


def _round_trip() -> YAML:
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096  # long commented lines stay on one line
    rt.indent(mapping=2, sequence=4, offset=2)
    rt.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    return rt


def _styled(value: Any, like: Any, *, flow: bool = False) -> Any:
    """``value`` as a ruamel node in the flow style of the node it replaces (``{...}`` stays ``{...}``,
    and so does all inside it)."""
    flow = flow or (isinstance(like, CommentedMap | CommentedSeq) and bool(like.fa.flow_style()))
    flow = flow or (isinstance(like, CommentedSeq) and not like)  # an empty [] is written flow
    if isinstance(value, Mapping):
        node = CommentedMap((k, _styled(v, None, flow=flow)) for k, v in value.items())
    elif isinstance(value, list | tuple):
        olds = list(like) if isinstance(like, CommentedSeq) and len(like) else [None]
        node = CommentedSeq(_styled(v, olds[min(i, len(olds) - 1)], flow=flow) for i, v in enumerate(value))
    else:
        return value
    if flow:
        node.fa.set_flow_style()
    return node


def lay_over(node: CommentedMap, merged: Mapping[str, Any]) -> None:
    """Make ``node`` (the params file as read, comments included) equal ``merged`` in place, touching
    only what differs: unchanged keys keep their comments and order, new keys go last."""
    for key in [k for k in node if k not in merged]:
        del node[key]
    for key, value in merged.items():
        old = node.get(key, _ABSENT)
        if isinstance(old, CommentedMap) and isinstance(value, Mapping) and not old.fa.flow_style():
            lay_over(old, value)
        elif old is _ABSENT or old != value:
            node[key] = _styled(value, old)


def write_params(source: Path, merged: Mapping[str, Any], target: Path) -> None:
    """Write ``merged`` to ``target`` as ``source`` (the params file it came from) with its comments."""
    rt = _round_trip()
    document = rt.load(source.read_text(encoding="utf-8"))
    lay_over(document, merged)
    with atomic_open(target) as handle:
        rt.dump(document, handle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.profiles", description=__doc__.splitlines()[0])
    parser.add_argument(
        "profiles", nargs="+", metavar="profile",
        help="profile name (configs/profiles/<name>.yaml) or a YAML path; several are laid over in order",
    )
    parser.add_argument("--params", default="params.yaml", help="params file the profile is checked against")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", metavar="PATH", help="write the merged params file here")
    action.add_argument("--run", action="store_true", help="run `dvc exp run -S ...` with the profile")
    action.add_argument("--print", action="store_true", help="print that command")
    args = parser.parse_args(argv)
    try:
        profile = combine_profiles([load_profile(name) for name in args.profiles])
        params = read_yaml(Path(args.params))  # YAML 1.2 as the stages read it: `dvc exp run -S` leaves `no` unquoted
        merged = apply_profile(params, profile)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.write:
        write_params(Path(args.params), merged, Path(args.write))
        return 0
    command = exp_run_command(profile, name="-".join(Path(name).stem for name in args.profiles), params=params)
    if args.print:
        print(shlex.join(command))
        return 0
    return subprocess.call(command)


if __name__ == "__main__":
    raise SystemExit(main())
