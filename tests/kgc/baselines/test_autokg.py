"""AutoKG with scripted replies: one call, without the team's knowledge background."""

from __future__ import annotations

from pipelines.kgc.baselines.autokg import AutoKG
from pipelines.llm.scripted import ScriptedBackend
from tests.kgc.baselines.curie import BIRTH, SCHEMAS, run
from tests.kgc.scripted import llm_for


def test_autokg_is_one_call_without_background():
    backend = ScriptedBackend([(r".", BIRTH)])
    result, trace = run(AutoKG(llm_for(backend), SCHEMAS))
    assert len(backend.calls) == 1 and result.calls == 1 and result.failed == 0
    assert len(result.items) == 2 and trace.rows[0]["role"] == "autokg"
    assert backend.calls[0][0]["content"].startswith("The relation extraction task is given")
