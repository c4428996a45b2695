"""The backbones of one run, each a "Model size" row of Table 4: ``llm.default`` (row
``tagging.size``, Base by default) and every entry of ``tagging.sizes`` (e.g. ``Large``).

Every size runs the LLM systems (team, single LLM) on the evaluation split; the first size also
runs the team on the generation split, whose right verdicts become the SFT rows. The systems of a
further size are named ``team@<size>`` and ``single_llm@<size>``, and their agents ask for the
roles ``<role>@<size>`` of one LLM runtime (:func:`runtime_config`): the size's backend as the
default, ``llm.roles`` kept, so a role on its own backend (the paper's GPT-4o numerical judge)
stays on it for every size and a sampling-only entry keeps its sampling.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.llm.config import LLMConfig, RoleSamplingConfig
from pipelines.tagging.config import ROLES, TaggingConfig

TEAM_ROLES = ("planner", "solver", "semantic_judge", "numerical_judge")
LLM_METHODS = ("team", "single_llm")


@dataclass(frozen=True)
class Size:
    """One backbone row: its name and the suffix of its roles and systems ("" for the first)."""

    name: str
    suffix: str = ""

    def role(self, role: str) -> str:
        return role + self.suffix

    def system(self, method: str) -> str:
        return method + self.suffix


def sizes(cfg: TaggingConfig) -> list[Size]:
    """``tagging.size`` first, then ``tagging.sizes`` in params order."""
    return [Size(cfg.size)] + [Size(name, f"@{name}") for name in cfg.sizes]


def system_names(cfg: TaggingConfig) -> list[str]:
    """Every system of the run in ``tagging.systems`` order, an LLM system once per size."""
    return [s.system(name) if name in LLM_METHODS else name for name in cfg.systems for s in sizes(cfg)
            if name in LLM_METHODS or not s.suffix]  # fmt: skip


def split_system(system: str) -> tuple[str, str]:
    """``"team@Large"`` -> ``("team", "@Large")``; ``"team"`` -> ``("team", "")``."""
    method, at, size = system.partition("@")
    return method, at + size


def runtime_config(cfg: TaggingConfig) -> LLMConfig:
    """``tagging.llm`` plus the roles ``<role>@<size>`` of every further size (see the module docstring)."""
    if not cfg.sizes:
        return cfg.llm
    roles = dict(cfg.llm.roles)
    for name, spec in cfg.sizes.items():
        for role in ROLES:
            entry = cfg.llm.roles.get(role)
            if entry is None:
                roles[f"{role}@{name}"] = spec
            elif isinstance(entry, RoleSamplingConfig):
                roles[f"{role}@{name}"] = spec.model_copy(update={"sampling": entry.sampling})
            else:
                roles[f"{role}@{name}"] = entry
    return cfg.llm.model_copy(update={"roles": roles})


def check_runtime(cfg: TaggingConfig, runtime: Any) -> None:
    """ValueError when a runtime passed in lacks the roles of ``tagging.sizes``."""
    missing = [f"planner{s.suffix}" for s in sizes(cfg)[1:] if f"planner{s.suffix}" not in runtime.config.roles]
    if missing:
        raise ValueError(
            f"the LLM runtime has no role {missing[0]!r} for tagging.sizes; build it from "
            "pipelines.tagging.backbones.runtime_config(cfg)"
        )


def short(model: str) -> str:
    return Path(str(model)).name or str(model)


def backbones(cfg: TaggingConfig, runtime: Any) -> dict[str, str]:
    """The backbone of each system: the encoder folder, the single LLM's model, and the team's model
    (with the roles on another model named, e.g. ``smollm2; numerical judge: gpt-4o``), per size."""
    out = {"embedding": short(cfg.embedding.model), "plm": short(cfg.plm.model)}
    for size in sizes(cfg):
        if "single_llm" in cfg.systems:
            out[size.system("single_llm")] = short(runtime.spec_for(size.role("single_llm")).model)
        if "team" in cfg.systems:
            models = {role: short(runtime.spec_for(size.role(role)).model) for role in TEAM_ROLES}
            main = max(set(models.values()), key=lambda m: (list(models.values()).count(m), m))
            others = [f"{role.replace('_', ' ')}: {m}" for role, m in models.items() if m != main]
            out[size.system("team")] = "; ".join([main, *others])
    return out
