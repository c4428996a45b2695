"""Json mode with ``spans: sentence``: every span of an answer schema is one of the sentence's own
substrings, narrowed per call, for the team and the baselines alike; ``spans: free`` keeps the
bounded strings."""

from __future__ import annotations

import asyncio
import json

import pytest

from pipelines.kgc.agents.answer_bounds import MAX_SPAN_CHOICES, AnswerBounds, candidate_spans
from pipelines.kgc.agents.experts import expert_role, expert_vars, make_expert
from pipelines.kgc.schema import load_schema
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend

SMALL = AnswerBounds(items=2, arguments=1, span_chars=16, reason_chars=12)


def test_answer_schema_with_spans_makes_every_span_one_shared_enum():
    spans = ["Lionel Messi", "Rosario", "Born"]
    ref = {"$ref": "#/$defs/span"}
    ner = expert_role("ner").answer_schema(load_schema("conllpp"), bounds=SMALL, spans=spans, reason=False)
    assert ner["$defs"] == {"span": {"enum": spans}}
    assert ner["properties"]["entities"]["items"]["properties"]["text"] == ref
    re_schema = expert_role("re").answer_schema(load_schema("nyt11_hrl"), bounds=SMALL, spans=spans)
    re_item = re_schema["properties"]["triples"]["items"]
    assert re_item["properties"]["head"] == re_item["properties"]["tail"] == ref
    ee = expert_role("ee").answer_schema(load_schema("ace05"), bounds=SMALL, spans=spans)
    branches = ee["properties"]["events"]["items"]["anyOf"]
    assert all(b["properties"]["trigger"] == ref for b in branches)
    assert all(b["properties"]["arguments"]["items"]["properties"]["text"] == ref for b in branches)
    assert json.dumps(ee).count('"Rosario"') == 1  # one enum for the 33 event types' span fields
    too_many = [f"w{i}" for i in range(MAX_SPAN_CHOICES + 1)]
    free = expert_role("ner").answer_schema(load_schema("conllpp"), bounds=SMALL, spans=too_many, reason=False)
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

    from tests.kgc.agents.test_answer_bounds import _admits, _grammar
    from tests.tiny_models import smollm2_dir

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir())
    text = "Former South Carolina governor John West died ."
    spans = candidate_spans(text, language="en", max_chars=20)
    grammar = _grammar(tokenizer, expert_role("ner").answer_schema(load_schema("conllpp"), spans=spans, reason=False))
    entity = '{"entities": [{"type": "LOC", "text": "%s"}]}'
    assert _admits(tokenizer, grammar, entity % "South Carolina")
    assert _admits(tokenizer, grammar, entity % "John West")
    for bad in ("Former South Carolin", "Carolina governor John", "Texas", "south carolina", "West died ."):
        assert not _admits(tokenizer, grammar, entity % bad), bad
    events = _grammar(tokenizer, expert_role("ee").answer_schema(load_schema("ace05"), spans=spans, reason=False))
    event = '{"events": [{"event_type": "Life:Die", "trigger": "%s", "arguments": [{"role": "Victim", "text": "%s"}]}]}'
    assert _admits(tokenizer, events, event % ("died", "John West"))
    assert not _admits(tokenizer, events, event % ("killed", "John West"))
    assert not _admits(tokenizer, events, event % ("died", "Jim West"))
