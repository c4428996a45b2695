"""ChatIE with scripted replies: the types first, then one turn per type found; its type-list parser."""

from __future__ import annotations

from pipelines.kgc.baselines.chatie import ChatIE, parse_type_list
from pipelines.kgc.schema import Triple
from pipelines.llm.scripted import ScriptedBackend
from tests.kgc.baselines.curie import BIRTH, NYT, SCHEMAS, run
from tests.kgc.scripted import llm_for


def test_chatie_asks_types_then_one_turn_per_type():
    backend = ScriptedBackend(
        [
            (r'For the type "/people/person/place_of_birth"', BIRTH),
            (r"Which of the given", "[/people/person/place_of_birth]"),
        ]
    )
    result, trace = run(ChatIE(llm_for(backend), SCHEMAS))
    assert len(backend.calls) == 2 and [r["step"] for r in trace.rows] == [
        "chatie:types",
        "chatie:/people/person/place_of_birth",
    ]
    assert result.items == [Triple("Marie Curie", "/people/person/place_of_birth", "Warsaw")]  # only the asked type
    assert "Your answer: [/people/person/place_of_birth]" in backend.calls[1][-1]["content"]


def test_chatie_type_list_parser():
    assert parse_type_list(NYT, "[/location/country/capital, /location/location/contains]") == [
        "/location/location/contains",
        "/location/country/capital",
    ]
    assert parse_type_list(NYT, "NO") == []
