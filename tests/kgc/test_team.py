"""The team with scripted experts: the Messi correction passes from the NER expert to the EE expert;
concurrency inside a round; the ablation switches."""

from __future__ import annotations

import asyncio
import time

import pytest

from pipelines.agents import SampleTrace
from pipelines.kgc.demos import DemoSelector
from pipelines.kgc.schema import Entity, Sentence, load_schema
from pipelines.kgc.scoring import score
from pipelines.kgc.team import CooperKGC, MemberConfig, TeamConfig
from pipelines.llm.scripted import ScriptedBackend
from tests.kgc.scripted import EE_WITH_TIME, MESSI, char_embed, llm_for, messi_rules, messi_sentence

SCHEMAS = {n: load_schema(n) for n in ("ontonotes5", "retacred", "ace05", "conllpp", "nyt11_hrl")}
MEMBERS = {
    "en": [
        MemberConfig(task="ner", schema_name="ontonotes5"),
        MemberConfig(task="re", schema_name="retacred"),
        MemberConfig(task="ee", schema_name="ace05"),
    ]
}


def run_team(cfg: TeamConfig, sentence: Sentence, backend=None, selector=None, shots=0):
    backend = backend or ScriptedBackend(messi_rules())
    team = CooperKGC(llm_for(backend), cfg, SCHEMAS, selector=selector, shots=shots)
    trace = SampleTrace(sentence.id)
    return asyncio.run(team.run(sentence, trace)), trace, backend


def test_messi_time_argument_added_after_ner_replica():
    sentence = messi_sentence()
    result, trace, backend = run_team(TeamConfig(members=MEMBERS, rounds=2), sentence)
    f1 = [score("ee", [(sentence.events, items)])["overall"]["f1"] for items in result.items_per_round()]
    assert f1[0] < 1.0 and f1[1] == 1.0 and f1[2] == 1.0
    assert len(result.rounds) == 3 and len(trace.rows) == 9 and len(backend.calls) == 9
    ee_round1 = [r for r in trace.rows if r["expert"] == "ee_2" and r["round"] == 1][0]
    user = ee_round1["prompt"][-1]["content"]
    ner_said = "[(PERSON, Lionel Messi), (GPE, Rosario), (GPE, Argentina), (DATE, 1987)]"
    re_said = "[(Lionel Messi, per:date_of_birth, 1987), (Lionel Messi, per:city_of_birth, Rosario)]"
    ee_said = (
        "[{Trigger Type: Life:Be-Born, Trigger Word: Born, Arguments: [(Person, Lionel Messi), (Place, Rosario)]}]"
    )
    assert (
        f'The answer given by the NER expert agent in the knowledge graph construction team was "{ner_said}".' in user
    )
    assert f'The RE expert agent gave the answer "{re_said}".' in user
    assert f'The event extraction answer you gave in the last round of collaboration was "{ee_said}".' in user
    assert ee_round1["reply"] == EE_WITH_TIME and "(Time, 1987)" in ee_round1["kept"]
    assert result.rounds[1]["ee_2"].reason.startswith("The NER expert recognises 1987")
    assert result.primary == "ee_2" and result.failed == 0


def test_experts_of_one_round_run_concurrently():
    backend = ScriptedBackend(messi_rules(), delay_s=0.2)
    start = time.perf_counter()
    run_team(TeamConfig(members=MEMBERS, rounds=1), messi_sentence(), backend)
    assert time.perf_counter() - start < 0.2 * 2 + 0.25  # 2 rounds of 3 calls each, not 6 calls in a row


def test_rounds_zero_is_single_extraction_and_schema_filter_counts():
    backend = ScriptedBackend(
        [
            (r"The named entity recognition task", "[(PERSON, Lionel Messi), (ANIMAL, Rosario), (DATE 1987)]"),
            (r".", "NO"),
        ]
    )
    result, trace, _ = run_team(TeamConfig(members=MEMBERS, rounds=0), messi_sentence(), backend)
    assert len(result.rounds) == 1 and len(trace.rows) == 3
    ner = result.rounds[0]["ner_0"]
    assert ner.items == [Entity("PERSON", "Lionel Messi")] and ner.dropped == 1 and ner.malformed == 1
    assert result.final.items == [] and result.final.replica == "NO" and result.failed == 0


def test_without_simplification_peers_see_the_raw_reply():
    _, trace, _ = run_team(TeamConfig(members=MEMBERS, rounds=2, simplification=False), messi_sentence())
    ner_round2 = [r for r in trace.rows if r["expert"] == "ner_0" and r["round"] == 2][0]
    assert "so the Be-Born event has the Time argument 1987" in ner_round2["prompt"][-1]["content"]
    _, trace, _ = run_team(TeamConfig(members=MEMBERS, rounds=2), messi_sentence())
    ner_round2 = [r for r in trace.rows if r["expert"] == "ner_0" and r["round"] == 2][0]
    assert "Time argument" not in ner_round2["prompt"][-1]["content"]


def test_without_simplification_round_one_peers_see_round_zero_reasons_in_json_mode():
    """With the default single collaboration round, the ablation changes what the experts receive:
    round 0's replies reason (json mode asks for it) and only the simplified replica drops it."""
    ner = '{"reason": "1987 is a year, Messi a person", "entities": [{"type": "DATE", "text": "1987"}]}'
    rules = [(r"The named entity", ner), (r"The relation extraction", '{"reason": "no pair", "triples": []}'),
             (r".", '{"reason": "Born is the trigger", "events": []}')]  # fmt: skip
    prompts = {}
    for simplification in (True, False):
        team = CooperKGC(llm_for(ScriptedBackend(rules)), TeamConfig(members=MEMBERS, rounds=1,
                         simplification=simplification), SCHEMAS, mode="json")  # fmt: skip
        trace = SampleTrace("s")
        asyncio.run(team.run(messi_sentence(), trace))
        ee = next(r for r in trace.rows if r["expert"] == "ee_2" and r["round"] == 1)
        prompts[simplification] = ee["prompt"][-1]["content"]
        first = next(r for r in trace.rows if r["expert"] == "ee_2" and r["round"] == 0)
        assert 'Reply with JSON in this form: {"reason": "...", "events"' in first["prompt"][0]["content"]
    assert '{"entities": [{"type": "DATE", "text": "1987"}]}' in prompts[True]  # the replica: items only
    assert "1987 is a year" not in prompts[True] and "Born is the trigger" not in prompts[True]
    assert "1987 is a year, Messi a person" in prompts[False] and "Born is the trigger" in prompts[False]


def test_background_switch_drops_opening_statement_keeps_schema():
    _, with_bg, _ = run_team(TeamConfig(members=MEMBERS, rounds=0), messi_sentence())
    _, without, _ = run_team(TeamConfig(members=MEMBERS, rounds=0, background=False), messi_sentence())
    assert with_bg.rows[0]["prompt"][0]["content"].startswith("You are a knowledge graph constructor")
    system = without.rows[0]["prompt"][0]["content"]
    assert "knowledge graph constructor" not in system and "excellent expert" not in system
    assert "The list of constrained" in system


def test_extra_member_and_primary_takes_the_dataset_schema():
    members = {"en": MEMBERS["en"] + [MemberConfig(task="ner", schema_name="conllpp", name="CoNLL NER expert agent")]}
    sentence = Sentence("conllpp:1", "conllpp", "ner", "en", MESSI, entities=[Entity("PER", "Lionel Messi")])
    backend = ScriptedBackend([(r"The named entity recognition task", "[(PER, Lionel Messi)]"), (r".", "NO")])
    result, trace, _ = run_team(TeamConfig(members=members, rounds=1), sentence, backend)
    assert len(trace.rows) == 8 and result.primary == "ner_0"
    assert [r["schema"] for r in trace.rows if r["round"] == 0 and r["task"] == "ner"] == ["conllpp", "conllpp"]
    assert result.final.items == [Entity("PER", "Lionel Messi")]
    user = [r for r in trace.rows if r["expert"] == "ner_0" and r["round"] == 1][0]["prompt"][-1]["content"]
    assert 'The CoNLL NER expert agent gave the answer "[(PER, Lionel Messi)]"' in user


def test_demonstrations_are_the_nearest_pool_sentences():
    pool = [
        Sentence("ace05:p1", "ace05", "ee", "en", "Rebels attacked the capital .", events=[]),
        Sentence("ace05:p2", "ace05", "ee", "en", "Born in Paris in 1950 Anna Smith is a famous painter .", events=[]),
    ]
    selector = DemoSelector({"ace05": pool}, char_embed)
    _, trace, _ = run_team(TeamConfig(members=MEMBERS, rounds=0), messi_sentence(), selector=selector, shots=1)
    ee = [r for r in trace.rows if r["expert"] == "ee_2"][0]["prompt"][-1]["content"]
    assert ee.startswith("Examples:\nText: Born in Paris in 1950 Anna Smith is a famous painter .\nAnswer: NO\n")
    ner = [r for r in trace.rows if r["expert"] == "ner_0"][0]["prompt"][-1]["content"]
    assert ner.startswith("Text: ")  # no ontonotes5 pool loaded: 0-shot for that member


def test_json_mode_sends_the_schema_and_parses_the_answer_model():
    seen = []

    class Recording(ScriptedBackend):
        async def chat(self, messages, params):
            seen.append(params.json_schema)
            return await super().chat(messages, params)

    event = '{"event_type": "Life:Be-Born", "trigger": "Born", "arguments": [{"role": "Time", "text": "1987"}]}'
    born = '{"reason": "", "events": [' + event + "]}"
    backend = Recording(
        [(r"The event extraction task", born), (r"The named entity", '{"entities": []}'), (r".", '{"triples": []}')]
    )
    team = CooperKGC(llm_for(backend), TeamConfig(members=MEMBERS, rounds=1), SCHEMAS, mode="json")
    trace = SampleTrace("s")
    result = asyncio.run(team.run(messi_sentence(), trace))
    assert result.final.items[0].arguments[0].text == "1987" and result.failed == 0
    assert all(r["mode"] == "json" for r in trace.rows) and len(seen) == 6
    ee = [s for s in seen if "events" in s["properties"]]
    # every round reasons first (Algorithm 1 simplifies r_0 as well as the later replies)
    assert len(ee) == 2 and [list(s["properties"]) for s in ee] == [["reason", "events"], ["reason", "events"]]
    branches = ee[0]["properties"]["events"]["items"]["anyOf"]
    assert [b["properties"]["event_type"]["const"] for b in branches] == list(SCHEMAS["ace05"].events)
    born = next(b for b in branches if b["properties"]["event_type"]["const"] == "Life:Be-Born")
    roles = born["properties"]["arguments"]["items"]["properties"]["role"]["enum"]
    assert roles == list(SCHEMAS["ace05"].events["Life:Be-Born"])
    assert '"Trigger Type' not in trace.rows[-1]["prompt"][-1]["content"]  # peers' replicas are JSON too


def test_a_member_schema_without_its_dataset_is_a_config_error_with_the_fix() -> None:
    from pipelines.config import ConfigError

    members = {"en": [MemberConfig(task="ee", schema_name="duee9")]}
    with pytest.raises(ConfigError, match=r"kgc.team.members.en: schema 'duee9' is neither .* add the dataset"):
        CooperKGC(lambda role: None, TeamConfig(members=members, rounds=1), SCHEMAS)
