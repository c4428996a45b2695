"""What every generate stage's params section and run share, so a team config holds only its method.

:class:`GenerationConfig` has the keys each team repeated (``output_mode``, ``concurrency``,
``max_failed_share``, ``max_unparseable_share``, ``llm`` with the team's ``ROLES`` checked, ``outputs``, ``shard``,
``progress``); a team config subclasses it, sets ``ROLES`` and names its output folders
(:meth:`GenerationConfig.harness_options` hands the harness its options from these keys)::

    class TaggingConfig(GenerationConfig):
        ROLES: ClassVar[tuple[str, ...]] = ("planner", "solver", ...)
        outputs: OutputsConfig = OutputsConfig()     # the team's GenerationOutputs defaults
        ...                                          # the method's own keys

:func:`run_runtime` is the runtime a ``generate_<team>_async`` call uses: the one passed in (left
open: the evaluate stage shares one between runs) or one built from the config (closed at the end)::

    async with run_runtime(cfg.llm, runtime) as runtime:
        return await _generate(cfg, root, runtime)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from pipelines.agents.outputs import GenerationOutputs
from pipelines.agents.shards import ShardConfig
from pipelines.config import StrictModel
from pipelines.llm.client import LLMRuntime
from pipelines.llm.config import LLMConfig


class GenerationConfig(StrictModel):
    """The keys every generate stage's section has (see the module docstring)."""

    ROLES: ClassVar[tuple[str, ...]] = ()
    """The team's LLM roles: ``llm.roles`` may name only these."""

    output_mode: Literal["text", "json"] = Field(
        "json",
        description="json: each agent's reply constrained to its declared schema where the backend can (a non-JSON "
        "reply falls back to the text parser) | text: the paper's free-text prompts and parsers",
    )
    concurrency: int = Field(
        16, ge=1, description="LLM calls in flight over all samples (one limit; 64-256 on vLLM/API)"
    )
    max_failed_share: float = Field(
        0.2, ge=0.0, le=1.0,
        description="more failed samples (crashed, or an LLM call failed for good) than this share -> outputs and "
        "failures.json written, exit 1",
    )
    max_unparseable_share: float = Field(
        0.5, ge=0.0, le=1.0,
        description="more unparseable replies than this share (over all systems) -> exit 1 after writing outputs",
    )
    llm: LLMConfig = Field(description="default (backend) and cache: the top-level llm's, unless set here")
    outputs: GenerationOutputs
    shard: ShardConfig = Field(
        ShardConfig(), description="this run's part of the samples (set by --shard INDEX/COUNT; docs/runtime.md)"
    )
    progress: bool = Field(True, description="tqdm progress bars")

    @field_validator("llm")
    @classmethod
    def _known_roles(cls, llm: LLMConfig) -> LLMConfig:
        llm.check_roles(cls.ROLES)
        return llm

    def harness_options(self) -> dict[str, Any]:
        """The options of :func:`pipelines.agents.harness.run_systems` this section sets, given once:
        ``concurrency``, ``max_failed_share``, ``max_unparseable_share``, ``progress``
        (``run_systems(..., **cfg.harness_options())``)."""
        return {
            "concurrency": self.concurrency,
            "max_failed_share": self.max_failed_share,
            "max_unparseable_share": self.max_unparseable_share,
            "progress": self.progress,
        }


@asynccontextmanager
async def run_runtime(llm: LLMConfig, runtime: LLMRuntime | None = None) -> AsyncIterator[LLMRuntime]:
    """``runtime`` as it is (the caller closes it), else a new :class:`LLMRuntime` of ``llm``, closed on exit."""
    if runtime is not None:
        yield runtime
        return
    runtime = LLMRuntime(llm)
    try:
        yield runtime
    finally:
        await runtime.close()
