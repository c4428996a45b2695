"""Every tagging agent's json-mode reply closes within its cap and parses.

The longest reply each schema admits (``pipelines.agents.reply_bounds``) is accepted by xgrammar
(compiled as ``pipelines.llm.grammar`` compiles it), parses to the agent's result, and fits the
``max_tokens`` the team gives the agent in json mode; random schema-valid replies all parse;
xgrammar admits exactly the strings pydantic validates for every pattern the schemas use; and no
token of SmolLM2's tokenizer is shorter than a byte, so the byte bound is a token bound.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import random
from pathlib import Path
from typing import Annotated

import pytest
import yaml
from pydantic import Field, TypeAdapter, ValidationError

from pipelines.agents import ParseError
from pipelines.agents.reply_bounds import UnboundedSchema, longest_reply, max_reply_bytes
from pipelines.tagging.agents import numerical_judge as nj
from pipelines.tagging.agents.single_llm import make_single_llm
from pipelines.tagging.team import TaggingTeam, TeamConfig, cap_to_schema

xgr = pytest.importorskip("xgrammar")

PARAMS = yaml.safe_load((Path(__file__).parents[3] / "params.yaml").read_text(encoding="utf-8"))["tagging"]


def grammar(schema: dict) -> object:
    """The grammar pipelines.llm.grammar compiles (compact JSON, strict), compiled once for string checks."""
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)
    return compiler.compile_grammar(
        xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False, strict_mode=True)
    )


def accepts(compiled: object, text: str) -> bool:
    """Whether the compiled grammar admits exactly ``text`` (as ``xgrammar.testing`` checks, without
    compiling the grammar again for every string)."""
    matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return matcher.accept_string(text) and matcher.is_terminated()


VALUES = {"first_factor": 47, "prices": [125, 30], "ratio_": 0.5}


def default_agents():
    """(agent, schema override or None) of every tagging agent as the default params build them, json mode;
    the program writer of both forms, declared and narrowed to arguments as each call is."""
    team = TaggingTeam(lambda role: None, TeamConfig(**PARAMS["team"]), mode="json")
    comparisons = TaggingTeam(
        lambda role: None, TeamConfig(**{**PARAMS["team"], "program": "comparisons"}), mode="json"
    )
    return [
        (team.planner, None),
        (team.solver, None),
        (team.semantic_judge, None),
        (team.arg_extractor, None),
        (team.program_writer, None),
        (team.program_writer, nj.script_output(VALUES)),
        (team.program_writer, nj.script_output({"a": 3})),
        (comparisons.program_writer, None),
        (comparisons.program_writer, nj.program_output(VALUES)),
        (cap_to_schema(make_single_llm()), None),
    ]


AGENTS = default_agents()
IDS = [
    "program_writer_" + ("python" if a.output is nj.ScriptOutput else "comparisons") + ("_narrowed" if o else "")
    if a.name == "program_writer"
    else a.name
    for a, o in AGENTS
]
IDS[6] += "_one_scalar"
DECODED = [(a, o) for (a, o), i in zip(AGENTS, IDS, strict=True) if i != "program_writer_python"]
DECODED_IDS = [i for i in IDS if i != "program_writer_python"]
"""What the backends decode with: in python form a call's schema is always narrowed (the declared
one is only shown in the prompt and sets the cap: any print(...) line of its characters)."""


@pytest.mark.parametrize(("agent", "output"), AGENTS, ids=IDS)
def test_longest_valid_reply_is_admitted_parses_and_fits_the_cap(agent, output):
    schema = (output or agent.output).model_json_schema()
    reply = longest_reply(schema)
    assert accepts(grammar(schema), reply), reply  # the bound is reached: it is tight
    assert agent.parse(reply, "json", output=output) is not None
    assert len(reply.encode()) == max_reply_bytes(schema) <= agent.max_tokens
    assert agent.max_tokens == max_reply_bytes(agent.json_schema)  # json mode: the cap is the declared bound


def test_caps_of_the_default_params():
    caps = {name: agent.max_tokens for (agent, output), name in zip(AGENTS, IDS, strict=True) if output is None}
    assert caps == {
        "planner": 663,  # 2 sub-constraints of up to 72 characters of up to 4 bytes
        "solver": 437,
        "semantic_judge": 274,
        "arg_extractor": 330,
        "program_writer_python": 460,  # print(...) of 448 ASCII characters: three 22-character arguments
        "program_writer_comparisons": 335,
        "single_llm": 274,
    }
    assert PARAMS["team"]["max_constraints"] == 2


def test_text_mode_keeps_the_configured_caps():
    team = TaggingTeam(lambda role: None, TeamConfig(**PARAMS["team"]), mode="text")
    assert team.planner.max_tokens == PARAMS["team"]["max_tokens"]["planner"]
    assert team.program_writer.max_tokens == PARAMS["team"]["max_tokens"]["program_writer"]


def test_narrowed_program_replies_name_only_the_variables_and_always_run():
    values = {"first_factor": 47, "prices": [125, 30]}
    model = nj.program_output(values)
    ok = '{"comparisons": [{"left": "sum(prices) + first_factor", "op": ">", "right": "100"}]}'
    assert nj.make_program_writer().parse(ok, "json", output=model).code == (
        "print(bool((sum(prices) + first_factor) > (100)))"
    )
    for bad in (
        '{"comparisons": [{"left": "first_number", "op": ">", "right": "1"}]}',  # undefined (the prompt's example)
        '{"comparisons": [{"left": "prices + 1", "op": ">", "right": "1"}]}',  # a list in arithmetic
        '{"comparisons": [{"left": "10", "op": "<", "right": "first_factor"}]}',  # the left side starts with a value
        '{"comparisons": [{"left": "10%", "op": ">", "right": "11"}]}',
    ):
        with pytest.raises(ParseError, match="comparisons.0.left"):
            nj.make_program_writer().parse(bad, "json", output=model)
    gr = grammar(model.model_json_schema())
    rng = random.Random(0)
    for _ in range(30):  # random schema-valid sides: each one compiles and runs
        left = rng.choice(["first_factor", "len(prices)", "max(prices)"]) + rng.choice(["", " // 7", " - first_factor"])
        right = rng.choice(["0", "-3.25", "first_factor % 10", "sum(prices)"])
        reply = json.dumps({"comparisons": [{"left": left, "op": rng.choice(["<", ">=", "!="]), "right": right}]})
        assert accepts(gr, reply)
        code = nj.checking_program(nj.NumericArgs(values), nj.make_program_writer().parse(reply, "json", output=model))
        namespace: dict = {}
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(compile(code, "<program>", "exec"), namespace)  # noqa: S102 - trusted test program
        assert out.getvalue().strip() in ("True", "False")


def test_narrowed_python_lines_name_only_the_variables_and_always_print_a_boolean():
    model, writer = nj.script_output(VALUES), nj.make_program_writer()
    line = "print(any(100 <= x <= 999 for x in prices) and first_factor % 10 != 0)"
    assert writer.parse(json.dumps({"code": line}), "json", output=model).code == line
    for bad in (
        "print(first_number > 1)",  # undefined (the prompt's example)
        "print(prices + 1 > 2)",  # a list in arithmetic
        "print(first_factor)",  # not a condition: would print 47
        "print(1 < 2)",  # about no value of the question
        "print(first_factor / 0 > 1)",  # a literal zero divisor
        "import os",
    ):
        with pytest.raises(ParseError, match="ScriptOutput: code"):
            writer.parse(json.dumps({"code": bad}), "json", output=model)
    schema = model.model_json_schema()
    gr, rng, printed = grammar(schema), random.Random(2), set()
    for _ in range(200):  # random schema-valid lines: each one runs on the arguments and prints a boolean
        reply = random_reply(schema, rng)
        assert accepts(gr, reply), reply
        code = nj.checking_program(nj.NumericArgs(VALUES), writer.parse(reply, "json", output=model))
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(compile(code, "<program>", "exec"), {})  # noqa: S102 - a grammar-made program over test values
        printed.add(out.getvalue().strip())
    assert printed == {"True", "False"}


def patterns(schema, found=None):
    found = [] if found is None else found
    if isinstance(schema, dict):
        if "pattern" in schema:
            found.append(schema["pattern"])
        for value in schema.values():
            patterns(value, found)
    elif isinstance(schema, list):
        for value in schema:
            patterns(value, found)
    return found


PIECES = ["first_factor", "prices", "len(prices)", "sum(b)", "b", "0", "7", "12", "1234567", "12345678", "-3", "4.5"]
PIECES += ["4.12345", "1/2", "25%", " + ", " - ", " // ", " % ", " * ", "+", "(", ")", " ", "x", "_", "if"]
PIECES += ["ZZZZZ", "\n", "1/0", "是否", "两位数？", "\u3000", '"', "\\", "**", "`", "\U0001d7d8", "abc d"]


def disagreements(pattern: str, tries: int = 400) -> list[tuple[str, bool]]:
    """Strings where xgrammar's acceptance differs from pydantic's validation of ``pattern``."""
    gr = grammar({"type": "string", "pattern": pattern})
    validate = TypeAdapter(Annotated[str, Field(pattern=pattern)]).validate_python
    rng = random.Random(0)
    texts = {"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4))) for _ in range(tries)}
    out = []
    for text in sorted(texts):
        try:
            validate(text)
            valid = True
        except ValidationError:
            valid = False
        if accepts(gr, json.dumps(text, ensure_ascii=False)) != valid:
            out.append((text, valid))
    return out


@pytest.mark.parametrize(
    "pattern",
    sorted({p for agent, output in AGENTS for p in patterns((output or agent.output).model_json_schema())}),
)
def test_xgrammar_admits_exactly_what_pydantic_validates(pattern):
    assert disagreements(pattern) == []


def test_a_question_mark_after_a_repeat_group_is_what_xgrammar_gets_wrong():
    """Why the patterns use {0,1}: xgrammar 0.2.7 admits 19 digits for this former number pattern."""
    old = r"^-?[0-9]{1,9}(\.[0-9]{1,6})?(/[0-9]{1,6})?%?$"
    with pytest.raises(ValidationError):
        TypeAdapter(Annotated[str, Field(pattern=old)]).validate_python("1010101010101010101")
    assert accepts(grammar({"type": "string", "pattern": old}), '"1010101010101010101"')
    assert not accepts(grammar({"type": "string", "pattern": nj.NUMBER_TEXT}), '"1010101010101"')


def test_unbounded_fields_are_named():
    cases = {
        "reply.text: a string without maxLength": {"type": "object", "properties": {"text": {"type": "string"}}},
        "reply.xs: an array without maxItems": {
            "type": "object",
            "properties": {"xs": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}}},
        },
        "reply.n: a number without minimum": {"type": "object", "properties": {"n": {"type": "number"}}},
        "reply.p: the pattern has an unbounded repeat": {
            "type": "object",
            "properties": {"p": {"type": "string", "pattern": "^[a-z]+$"}},
        },
    }
    for message, schema in cases.items():
        with pytest.raises(UnboundedSchema, match=message.replace("(", r"\(")):
            max_reply_bytes(schema)
    bounded = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": -50, "maximum": 9},
            "xs": {"type": "array", "items": {"type": "string", "maxLength": 2}, "maxItems": 2},
            "e": {"enum": ["a", "bbb"]},
        },
    }
    assert longest_reply(bounded) == '{"n": -50, "xs": ["\U0001d7d8\U0001d7d8", "\U0001d7d8\U0001d7d8"], "e": "bbb"}'
    assert max_reply_bytes(bounded) == len(longest_reply(bounded).encode()) == 54


@pytest.mark.slow  # reads the 49k-token vocabulary (about 15 s)
def test_every_smollm2_token_is_at_least_one_byte():
    from transformers import AutoTokenizer

    from tests.tiny_models import smollm2_dir

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir())
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer))
    special = set(info.special_token_ids)
    lengths = [len(token) for i, token in enumerate(info.decoded_vocab) if i not in special]
    assert len(lengths) > 40000 and min(lengths) >= 1


POOL = [chr(c) for c in range(32, 127)] + list("是否两位数？。，中文 \u3000\U0001d7d8\t\n")


def _in_class(char: str, items) -> bool:
    hit = False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            return not _in_class(char, items[1:])
        if name == "LITERAL":
            hit = hit or ord(char) == arg
        elif name == "RANGE":
            hit = hit or arg[0] <= ord(char) <= arg[1]
    return hit


def _random_match(parsed, rng: random.Random) -> str:
    out = []
    for op, arg in parsed:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "IN":
            out.append(rng.choice([c for c in POOL if _in_class(c, arg)]))
        elif name == "MAX_REPEAT":
            out.extend(_random_match(arg[2], rng) for _ in range(rng.randint(arg[0], arg[1])))
        elif name == "SUBPATTERN":
            out.append(_random_match(arg[-1], rng))
        elif name == "BRANCH":
            out.append(_random_match(rng.choice(arg[1]), rng))
    return "".join(out)


@functools.lru_cache(maxsize=64)
def _parsed(pattern: str):
    """A pattern parsed once (the narrowed program patterns are several kB)."""
    import re._parser as sre

    return sre.parse(pattern)


def random_reply(schema: dict, rng: random.Random, root: dict | None = None) -> str:
    """A random schema-valid reply in the grammar's compact form (the schemas' constructs only)."""

    root = root or schema
    if "$ref" in schema:
        return random_reply(root["$defs"][schema["$ref"].split("/")[-1]], rng, root)
    if "anyOf" in schema:
        return random_reply(rng.choice(schema["anyOf"]), rng, root)
    if "enum" in schema:
        return json.dumps(rng.choice(schema["enum"]))
    kind = schema["type"]
    if kind == "object":
        required = schema.get("required", [])
        fields = [(k, v) for k, v in schema["properties"].items() if k in required or rng.random() < 0.7]
        return "{" + ", ".join(f'"{k}": {random_reply(v, rng, root)}' for k, v in fields) + "}"
    if kind == "array":
        count = rng.randint(schema.get("minItems", 0), schema["maxItems"])
        return "[" + ", ".join(random_reply(schema["items"], rng, root) for _ in range(count)) + "]"
    if kind == "number":
        return rng.choice(["0", "-3", "47", "0.5", "-1250.25", "1000000", "-999999.125"])
    if "pattern" in schema:
        return json.dumps(_random_match(_parsed(schema["pattern"]), rng), ensure_ascii=False)
    plain = [c for c in POOL if c not in '"\\\n\t']
    text = "".join(rng.choice(plain) for _ in range(rng.randint(0, schema["maxLength"])))
    return json.dumps(text, ensure_ascii=False)


@pytest.mark.parametrize(("agent", "output"), DECODED, ids=DECODED_IDS)
def test_every_schema_valid_reply_parses(agent, output):
    """Random replies the grammar admits always parse: json mode has no unparseable reply left."""
    schema = (output or agent.output).model_json_schema()
    gr = grammar(schema)
    rng = random.Random(1)
    for _ in range(60):
        reply = random_reply(schema, rng)
        assert accepts(gr, reply), reply
        assert len(reply.encode()) <= agent.max_tokens
        agent.parse(reply, "json", output=output)  # raises ParseError if not
