"""One interface for a generating team: what the generate stage, the shard merge and the evaluate
stage need to know of it, so none of them names a team.

A team (in its own package, e.g. :mod:`pipelines.kgc.interface`) subclasses :class:`Team` and
registers an instance in :mod:`pipelines.teams`::

    class KGC(Team):
        name, stage = "kgc", "generate_kgc"
        sections = {"kgc": KGCConfig}            # params sections -> models; the first is the team's own

        async def generate_async(self, cfgs, *, root=".", runtime=None, **options): ...  # -> metrics
        def finish(self, cfgs, outputs, report, *, context, counters): ...             # -> metrics
        def summary(self, metrics): ...                                                 # -> one log line

- :meth:`Team.configure` gives the final configs at set-up (the default keeps them): nothing
  rewrites a config while the team runs, so :meth:`Team.fingerprint` is the params fingerprint of
  the configured sections, the same in every shard and in the merge.
- :meth:`Team.generate_async` runs the team over its samples through the generation harness and
  returns the metrics; a run (or shard) writes its outputs under the own section's ``outputs``.
- :meth:`Team.finish` turns the harness report and the predictions on disk into the metrics and
  reports; a run and the shard merge both call it, so a merged run's metrics are one run's.
- :meth:`Team.shortfalls` names what was requested and not produced (:mod:`pipelines.agents.shortfalls`).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from pipelines.agents.generation import GenerationConfig
from pipelines.agents.harness import HarnessReport
from pipelines.agents.outputs import GenerationOutputs
from pipelines.agents.shards import params_fingerprint
from pipelines.agents.shortfalls import Shortfall
from pipelines.llm.client import LLMRuntime

Configs = dict[str, Any]
"""Params section name -> its loaded config, in the order of :attr:`Team.sections`."""


class Team(ABC):
    """A generating team as the stages see it (see the module docstring)."""

    name: ClassVar[str]
    """The registry key and ``merge_shards --team`` value, e.g. ``"kgc"``."""
    stage: ClassVar[str]
    """The DVC stage that runs it, e.g. ``"generate_kgc"``."""
    sections: ClassVar[dict[str, type[BaseModel]]]
    """Params sections the stage loads -> their models; the first is the team's own (a
    :class:`GenerationConfig`: ``outputs``, ``shard``, the harness options)."""

    @property
    def own_section(self) -> str:
        return next(iter(self.sections))

    def own(self, cfgs: Configs) -> GenerationConfig:
        """The team's own section of ``cfgs``."""
        return cfgs[self.own_section]

    def configure(self, cfgs: Configs) -> Configs:
        """The final configs, once, when the stage has loaded them (default: as loaded)."""
        return cfgs

    @abstractmethod
    async def generate_async(
        self, cfgs: Configs, *, root: Path | str = ".", runtime: LLMRuntime | None = None, **options: Any
    ) -> dict[str, Any]:
        """Run the team over its samples (one shard with the own section's ``shard``); returns the
        metrics. A runtime passed in is used and left open, one made here is closed; ``options`` are
        the team's own (e.g. the sentences the evaluate stage holds out)."""

    def generate(
        self, cfgs: Configs, *, root: Path | str = ".", runtime: LLMRuntime | None = None, **options: Any
    ) -> dict[str, Any]:
        """:meth:`generate_async` from synchronous code (the generate stage)."""
        return asyncio.run(self.generate_async(cfgs, root=root, runtime=runtime, **options))

    @abstractmethod
    def finish(
        self,
        cfgs: Configs,
        outputs: GenerationOutputs,
        report: HarnessReport,
        *,
        context: dict[str, Any],
        counters: dict[str, Any],
    ) -> dict[str, Any]:
        """The metrics (and report files) from the predictions under ``outputs`` and the harness
        ``report``; ``context`` and ``counters`` as the run recorded them in its shard manifest."""

    def shortfalls(self, cfgs: Configs, metrics: dict[str, Any]) -> list[Shortfall | None]:
        """What was requested and not produced (None entries: nothing short); default none."""
        return []

    @abstractmethod
    def summary(self, metrics: dict[str, Any]) -> str:
        """One line for the stage's log."""

    def fingerprint(self, cfgs: Configs) -> str:
        """The params fingerprint of the configured sections (a shard's manifest records it; the
        merge checks it)."""
        return params_fingerprint(*(cfgs[name] for name in self.sections))
