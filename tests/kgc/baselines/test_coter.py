"""CoT-ER with scripted replies: three stages, the evidence of steps 1 and 2 carried into step 3."""

from __future__ import annotations

from pipelines.kgc.baselines.coter import CoTER
from pipelines.kgc.schema import Triple
from pipelines.llm.scripted import ScriptedBackend
from tests.kgc.baselines.curie import SCHEMAS, run
from tests.kgc.scripted import llm_for


def test_coter_three_steps_carry_evidence():
    backend = ScriptedBackend(
        [
            (r"Step 3", "Warsaw is her birthplace.\nAnswer: [(Marie Curie, /people/person/place_of_birth, Warsaw)]"),
            (r"Step 2", "Warsaw (city), Paris (city)"),
            (r"Step 1", "Marie Curie (person)"),
        ]
    )
    result, trace = run(CoTER(llm_for(backend), SCHEMAS))
    assert len(backend.calls) == 3 and result.calls == 3
    last = backend.calls[2][-1]["content"]
    assert "Step 1 evidence: Marie Curie (person)" in last and "Step 2 evidence: Warsaw (city), Paris (city)" in last
    assert result.items == [Triple("Marie Curie", "/people/person/place_of_birth", "Warsaw")]
