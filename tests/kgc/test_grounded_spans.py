"""Json mode with ``spans: sentence``: every span of an answer schema is one of the sentence's own
substrings, narrowed per call, for the team and the baselines alike; ``spans: free`` keeps the
bounded strings."""

from __future__ import annotations

import asyncio
import json

import pytest

from pipelines.kgc.agents.experts import expert_vars, make_expert
from pipelines.kgc.answers import MAX_SPAN_CHOICES, AnswerBounds, answer_schema, candidate_spans
from pipelines.kgc.schema import load_schema
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend

SMALL = AnswerBounds(items=2, arguments=1, span_chars=16, reason_chars=12)


def test_english_candidates_are_word_runs_that_do_not_cut_a_token():
    got = candidate_spans("Haitai 's U.S. unit (Reuters) .", language="en", max_chars=12)
    assert got == [
        "Haitai",
        "Haitai 's",
        "Reuters",
        "Reuters)",
        "U.S",
        "U.S.",
        "U.S. unit",
        "s",
        "s U.S",
        "s U.S.",
        "s U.S. unit",
        "unit",
    ]
    assert "Haitai" in got and "U.S." in got and "U.S. unit" in got and "Reuters" in got
    assert "S" not in got and "U" not in got and "S." not in got  # never from inside "U.S."
    assert not any(s.endswith(" .") or s.startswith("(") or s.startswith(".") for s in got)
    assert all(len(s) <= 12 for s in got)
    assert "Ukraine" in candidate_spans("Lutsk , a town in western Ukraine.", language="en", max_chars=20)


def test_chinese_candidates_are_character_runs_without_edge_punctuation():
    got = candidate_spans("长江流经上海。", language="zh", max_chars=2)
    assert got == sorted(["长", "江", "流", "经", "上", "海", "长江", "江流", "流经", "经上", "上海"])
    assert "海。" not in got and all("。" not in s for s in got)


def test_quotes_and_backslashes_never_enter_a_candidate():
    got = candidate_spans('He said "Paris" \\ Rome', language="en", max_chars=30)
    assert "Paris" in got and "Rome" in got
    assert not any('"' in s or "\\" in s for s in got)


def test_answer_schema_with_spans_makes_every_span_one_shared_enum():
    spans = ["Lionel Messi", "Rosario", "Born"]
    ref = {"$ref": "#/$defs/span"}
    ner = answer_schema("ner", load_schema("conllpp"), bounds=SMALL, spans=spans, reason=False)
    assert ner["$defs"] == {"span": {"enum": spans}}
    assert ner["properties"]["entities"]["items"]["properties"]["text"] == ref
    re_item = answer_schema("re", load_schema("nyt11_hrl"), bounds=SMALL, spans=spans)["properties"]["triples"]["items"]
    assert re_item["properties"]["head"] == re_item["properties"]["tail"] == ref
    ee = answer_schema("ee", load_schema("ace05"), bounds=SMALL, spans=spans)
    branches = ee["properties"]["events"]["items"]["anyOf"]
    assert all(b["properties"]["trigger"] == ref for b in branches)
    assert all(b["properties"]["arguments"]["items"]["properties"]["text"] == ref for b in branches)
    assert json.dumps(ee).count('"Rosario"') == 1  # one enum for the 33 event types' span fields
    too_many = [f"w{i}" for i in range(MAX_SPAN_CHOICES + 1)]
    free = answer_schema("ner", load_schema("conllpp"), bounds=SMALL, spans=too_many, reason=False)
    assert "$defs" not in free and free["properties"]["entities"]["items"]["properties"]["text"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 16,
    }


class RecordingBackend(ScriptedBackend):
    """The scripted backend that also keeps each request's sampling params (its json schema)."""

    def __init__(self, rules):
        super().__init__(rules)
        self.params = []

    async def chat(self, messages, params):
        self.params.append(params)
        return await super().chat(messages, params)


@pytest.mark.parametrize("spans", ["sentence", "free"])
def test_each_call_sends_the_spans_of_its_own_sentence(spans):
    schema = load_schema("conllpp")
    reply = json.dumps({"entities": [{"type": "PER", "text": "Lionel Messi"}]})
    backend = RecordingBackend([(r".", reply)])
    agent = make_expert("ner", schema, bounds=SMALL, spans=spans)
    texts = ["Lionel Messi plays .", "Rosario is a city ."]

    async def go():
        llm = LLM(backend, role="ner_expert")
        return [
            await agent.run(llm, {**expert_vars(schema, text=t, language="en"), "language": "en"}, mode="json")
            for t in texts
        ]

    records = asyncio.run(go())
    assert [r.parsed.items[0].text for r in records] == ["Lionel Messi", "Lionel Messi"]
    sent = [p.json_schema["properties"]["entities"]["items"]["properties"]["text"] for p in backend.params]
    if spans == "sentence":
        assert sent == [{"$ref": "#/$defs/span"}] * 2
        enums = [p.json_schema["$defs"]["span"]["enum"] for p in backend.params]
        assert enums == [candidate_spans(t, language="en", max_chars=16) for t in texts]
        assert "Rosario" in enums[1] and "Rosario" not in enums[0]
    else:
        assert sent == [{"type": "string", "minLength": 1, "maxLength": 16}] * 2
    assert agent.json_schema["properties"]["entities"]["items"]["properties"]["text"]["maxLength"] == 16
    with pytest.raises(ValueError, match="spans must be"):
        make_expert("ner", schema, spans="sentences")


def test_text_mode_sends_no_schema():
    schema = load_schema("conllpp")
    backend = RecordingBackend([(r".", "[(PER, Lionel Messi)]")])
    agent = make_expert("ner", schema, bounds=SMALL)
    vars = {**expert_vars(schema, text="Lionel Messi plays .", language="en"), "language": "en"}
    record = asyncio.run(agent.run(LLM(backend, role="ner_expert"), vars, mode="text"))
    assert record.ok and backend.params[0].json_schema is None


@pytest.mark.slow
def test_xgrammar_admits_only_the_sentences_spans():
    from transformers import AutoTokenizer

    from tests.kgc.test_answers import _admits, _grammar
    from tests.tiny_models import smollm2_dir

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir())
    text = "Former South Carolina governor John West died ."
    spans = candidate_spans(text, language="en", max_chars=20)
    grammar = _grammar(tokenizer, answer_schema("ner", load_schema("conllpp"), spans=spans, reason=False))
    entity = '{"entities": [{"type": "LOC", "text": "%s"}]}'
    assert _admits(tokenizer, grammar, entity % "South Carolina")
    assert _admits(tokenizer, grammar, entity % "John West")
    for bad in ("Former South Carolin", "Carolina governor John", "Texas", "south carolina", "West died ."):
        assert not _admits(tokenizer, grammar, entity % bad), bad
    events = _grammar(tokenizer, answer_schema("ee", load_schema("ace05"), spans=spans, reason=False))
    event = '{"events": [{"event_type": "Life:Die", "trigger": "%s", "arguments": [{"role": "Victim", "text": "%s"}]}]}'
    assert _admits(tokenizer, events, event % ("died", "John West"))
    assert not _admits(tokenizer, events, event % ("killed", "John West"))
    assert not _admits(tokenizer, events, event % ("died", "Jim West"))
