"""Json-mode answer schemas: their bounds per language, the candidate spans of a sentence, what
xgrammar (the transformers backend's constrained decoding) admits under them with the SmolLM2
tokenizer, and that the longest reply they admit for every dataset of params.yaml fits the task's
max_tokens there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.kgc.agents.answer_bounds import AnswerBounds, bounds_for, candidate_spans
from pipelines.kgc.agents.experts import expert_role
from pipelines.kgc.schema import Schema, load_schema

ROOT = Path(__file__).resolve().parents[3]
ACE = Schema(
    "tiny_ace",
    "ee",
    "en",
    events={"Life:Be-Born": ("Person", "Time", "Place"), "Conflict:Attack": ("Attacker", "Target")},
)
SMALL = AnswerBounds(items=2, arguments=1, span_chars=8, reason_chars=12)


def test_bounds_per_language():
    assert bounds_for("zh").span_chars < bounds_for("en").span_chars
    assert bounds_for("fr") == bounds_for("en")
    assert bounds_for("en", {"en": SMALL}) == SMALL


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


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from tests.tiny_models import smollm2_dir

    return AutoTokenizer.from_pretrained(smollm2_dir())


def _grammar(tokenizer, schema):
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tokenizer, stop_token_ids=[tokenizer.eos_token_id])
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    return compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, strict_mode=True)


def _admits(tokenizer, grammar, text: str) -> bool:
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(grammar)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return all(matcher.accept_token(i) for i in ids)


@pytest.mark.slow
def test_xgrammar_enforces_the_bounds(tokenizer):
    grammar = _grammar(tokenizer, expert_role("ee").answer_schema(ACE, bounds=SMALL, reason=True))
    event = '{"event_type": "Life:Be-Born", "trigger": "%s", "arguments": [%s]}'
    time = '{"role": "Time", "text": "1987"}'
    good = '{"reason": "r", "events": [' + event % ("born", time) + "]}"
    assert _admits(tokenizer, grammar, good)
    assert _admits(tokenizer, grammar, '{"reason": "", "events": []}')
    bad = {
        "reason too long": '{"reason": "1234567890123", "events": []}',
        "span too long": '{"reason": "", "events": [' + event % ("bornbornb", "") + "]}",
        "empty trigger": '{"reason": "", "events": [' + event % ("", "") + "]}",
        "role of another type": '{"reason": "", "events": [' + event % ("born", time.replace("Time", "Target")) + "]}",
        "too many arguments": '{"reason": "", "events": [' + event % ("born", time + ", " + time) + "]}",
        "too many events": '{"reason": "", "events": [' + ", ".join([event % ("born", "")] * 3) + "]}",
        "type not in schema": '{"reason": "", "events": [{"event_type": "Life:Die", "trigger": "x", "arguments": []}]}',
        "no reason asked in round 0 form": '{"events": []}',
        "escape inside a bounded string": '{"reason": "a\\"b", "events": []}',
    }
    assert {k: _admits(tokenizer, grammar, v) for k, v in bad.items()} == {k: False for k in bad}
    round0 = _grammar(tokenizer, expert_role("ee").answer_schema(ACE, bounds=SMALL, reason=False))
    assert _admits(tokenizer, round0, '{"events": []}')
    assert not _admits(tokenizer, round0, '{"reason": "", "events": []}')
    msra = expert_role("ner").answer_schema(load_schema("msra"), bounds=AnswerBounds(span_chars=3), reason=False)
    zh = _grammar(tokenizer, msra)
    assert _admits(tokenizer, zh, '{"entities": [{"type": "LOC", "text": "罗萨里"}]}')  # characters, not bytes
    assert not _admits(tokenizer, zh, '{"entities": [{"type": "LOC", "text": "罗萨里奥"}]}')


def _densest(tokenizer, texts: list[str], chars: int) -> str:
    """The window of ``chars`` characters of ``texts`` that takes the most tokens."""
    windows = [t[i : i + chars] for t in texts for i in range(max(1, len(t) - chars + 1))]
    return max(windows, key=lambda w: len(tokenizer(w, add_special_tokens=False)["input_ids"]))


def _longest_reply(tokenizer, schema: Schema, bounds: AnswerBounds, texts: list[str]) -> str:
    """The longest reply the bounded schema admits, its strings filled with the densest text of
    the dataset (every list full, the longest type and role names, a full reason)."""
    count = lambda s: len(tokenizer(s, add_special_tokens=False)["input_ids"])  # noqa: E731
    span, reason = _densest(tokenizer, texts, bounds.span_chars), _densest(tokenizer, texts, bounds.reason_chars)
    if schema.task == "ner":
        item = {"type": max(schema.types(), key=count), "text": span}
    elif schema.task == "re":
        item = {"head": span, "relation": max(schema.types(), key=count), "tail": span}
    else:

        def size(name):
            return count(name) + bounds.arguments * max([count(r) for r in schema.events[name]] or [0])

        name = max(schema.types(), key=size)
        roles = schema.events[name]
        arguments = [{"role": max(roles, key=count), "text": span}] * (bounds.arguments if roles else 0)
        item = {"event_type": name, "trigger": span, "arguments": arguments}
    return json.dumps({"reason": reason, expert_role(schema.task).items_key: [item] * bounds.items}, ensure_ascii=False)


@pytest.mark.slow
def test_longest_admitted_reply_fits_max_tokens_for_every_dataset(tokenizer, monkeypatch):
    """For each dataset of params.yaml (the demo fallbacks when ../shared is absent): the longest
    reply its bounded schema admits (with a reason, as in collaboration rounds) is a valid answer for
    xgrammar and, with its EOS, is no longer than the task's max_tokens: it closes, it is never cut."""
    from pipelines.config import load_section
    from pipelines.kgc.config import KGCConfig
    from pipelines.kgc.run import read_data

    monkeypatch.chdir(ROOT)
    cfg = load_section("kgc", KGCConfig, ROOT / "params.yaml")
    evaluated, pools, schemas, data = read_data(cfg, ROOT)
    assert data["datasets"]
    for name in data["datasets"]:
        schema = schemas[name]
        bounds = bounds_for(schema.language, cfg.team.bounds)
        texts = [s.text for s in pools[name] + [s for s in evaluated if s.dataset == name]][:40]
        reply = _longest_reply(tokenizer, schema, bounds, texts)
        json_schema = expert_role(schema.task).answer_schema(schema, bounds=bounds, reason=True)
        assert _admits(tokenizer, _grammar(tokenizer, json_schema), reply), (name, reply)
        limit = cfg.team.max_tokens.get(schema.task, cfg.llm.sampling.max_tokens)
        tokens = len(tokenizer(reply, add_special_tokens=False)["input_ids"]) + 1
        assert tokens <= limit, f"{name}: the longest admitted reply takes {tokens} tokens > max_tokens {limit}"
