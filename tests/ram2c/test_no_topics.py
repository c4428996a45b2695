"""Issue 37.5: when every topic reply is unparseable the stage said "no samples to run; check the
data path, its filters and data.limit"; it names the cause now."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pipelines.agents.harness import EmptyEvaluation
from pipelines.llm.client import LLMRuntime, backend_key
from pipelines.llm.scripted import ScriptedBackend
from pipelines.ram2c.run import generate_ram2c
from tests.ram2c.scripted import DOCS, FakeRetriever, rules
from tests.ram2c.test_shards import write_params


def test_every_topic_reply_unparseable_names_the_cause(tmp_path: Path) -> None:
    _, cfg, build, retrieval = write_params(tmp_path)
    table = [(r"You write discussion questions|你为一位和中小学生", "")] + rules()  # empty: never parses
    runtime = LLMRuntime(cfg.llm, backends={backend_key(cfg.llm.default): ScriptedBackend(table)})
    try:
        with pytest.raises(EmptyEvaluation) as err:
            generate_ram2c(cfg, build, retrieval, root=tmp_path, runtime=runtime, retriever=FakeRetriever(DOCS))
    finally:
        asyncio.run(runtime.close())
    message = str(err.value)
    assert "every topic reply was unparseable" in message and "replies of the topic writer did not parse" in message
    assert "check the data path" not in message
