"""The longest reply a JSON schema admits, as the constrained decoder writes it.

``longest_reply(schema) -> str`` builds one schema-valid reply of the greatest UTF-8 length, in the
compact form :mod:`pipelines.llm.grammar` compiles (``", "`` and ``": "`` separators, every property
in schema order, no free whitespace). ``max_reply_bytes(schema)`` is its length in bytes, and so an
upper bound on the reply's tokens for any tokenizer whose tokens each decode to at least one byte
(byte-level BPE: GPT-2, Llama 3, Qwen, SmolLM2); the EOS token is not part of the reply. An agent
whose ``max_tokens`` is at least this bound always gets a closed, complete JSON reply.

Sizes per schema node: a string with ``maxLength`` only holds at most that many characters of up to
4 bytes each (xgrammar admits no escapes and no newline there, so one character is one code point);
a string with a ``pattern`` holds the pattern's longest match (Python's regex parser; the pattern
must be bounded, and within ``maxLength`` when both are given); ``enum``/``const`` their longest
value; a number needs ``minimum`` and ``maximum`` (xgrammar then writes at most 6 decimals); an
array needs ``maxItems``. ``UnboundedSchema`` names the first field without a bound.
"""

from __future__ import annotations

import json
import re._parser as sre  # Python 3.11+: the regex parser (sre_parse before)
from typing import Any

WIDE_CHAR = "\U0001d7d8"  # a 4-byte character (MATHEMATICAL DOUBLE-STRUCK DIGIT ZERO)
NUMBER_DECIMALS = 6  # fractional digits xgrammar admits in a bounded number


_BLANK = r"\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"  # what str.strip() strips
_EDGE = f"[^{_BLANK}*_`\"\\\\]"  # neither blank nor markdown emphasis nor a quote/backslash
_INNER = '[^\\x00-\\x1f"\\\\]'  # no control character, quote or backslash (xgrammar admits no escape)


def trimmed_text(min_length: int, max_length: int) -> str:
    """A JSON-schema pattern for one line of ``min_length``..``max_length`` characters (``min_length``
    >= 1) whose first and last characters are neither blank nor ``*_` ``: stripping it keeps its
    length, so a schema-valid text is never empty after ``.strip()`` (written for xgrammar: no "?")."""
    if min_length == 1:
        return f"^{_EDGE}({_INNER}{{0,{max_length - 2}}}{_EDGE}){{0,1}}$"
    return f"^{_EDGE}{_INNER}{{{min_length - 2},{max_length - 2}}}{_EDGE}$"


class UnboundedSchema(ValueError):
    """A schema field with no length bound; the message names it and the keyword to add."""


def _width(text: str) -> int:
    return len(text.encode("utf-8"))


def _widest(options: list[str]) -> str:
    return max(options, key=_width)


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    if not ref.startswith("#/"):
        raise UnboundedSchema(f"$ref {ref!r}: only local references are read")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return _resolve(node, root)


def longest_reply(schema: dict[str, Any]) -> str:
    """One valid reply of ``schema`` with the most UTF-8 bytes (see the module docstring)."""
    return _longest(schema, schema, "reply")


def max_reply_bytes(schema: dict[str, Any]) -> int:
    """UTF-8 bytes of the longest reply ``schema`` admits (an upper bound on its tokens)."""
    return _width(longest_reply(schema))


def _longest(schema: dict[str, Any], root: dict[str, Any], where: str) -> str:
    schema = _resolve(schema, root)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _widest([_longest(s, root, where) for s in schema[key]])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    if "enum" in schema:
        return _widest([json.dumps(v, ensure_ascii=False) for v in schema["enum"]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _widest([_longest({**schema, "type": k}, root, where) for k in kind])
    if kind == "object":
        fields = [f"{json.dumps(name)}: {_longest(sub, root, f'{where}.{name}')}" for name, sub in _props(schema)]
        return "{" + ", ".join(fields) + "}"
    if kind == "array":
        if "maxItems" not in schema:
            raise UnboundedSchema(f"{where}: an array without maxItems")
        item = _longest(schema.get("items", {}), root, f"{where}[]")
        return "[" + ", ".join([item] * schema["maxItems"]) + "]"
    if kind == "string":
        return '"' + _longest_string(schema, where) + '"'
    if kind in ("number", "integer"):
        return _longest_number(schema, where, integer=kind == "integer")
    if kind == "boolean":
        return "false"
    if kind == "null":
        return "null"
    raise UnboundedSchema(f"{where}: no type, enum or const (any JSON value is unbounded)")


def _props(schema: dict[str, Any]) -> list[tuple[str, Any]]:
    extra = schema.get("additionalProperties")
    if extra not in (None, False):
        raise UnboundedSchema("additionalProperties admits any number of fields; set it to false")
    return list(schema.get("properties", {}).items())


def _longest_number(schema: dict[str, Any], where: str, *, integer: bool) -> str:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is None or high is None:
        raise UnboundedSchema(f"{where}: a number without minimum and maximum")
    texts = []
    for bound in (low, high):
        whole = str(abs(int(bound)))
        texts.append(("-" if bound < 0 else "") + whole + ("" if integer else "." + "0" * NUMBER_DECIMALS))
    return _widest(texts)


def _longest_string(schema: dict[str, Any], where: str) -> str:
    max_length = schema.get("maxLength")
    pattern = schema.get("pattern")
    if pattern is None:
        if max_length is None:
            raise UnboundedSchema(f"{where}: a string without maxLength or pattern")
        return WIDE_CHAR * max_length
    text = _longest_match(sre.parse(pattern), where)
    if max_length is not None and len(text) > max_length:
        raise UnboundedSchema(f"{where}: pattern {pattern!r} admits {len(text)} characters > maxLength {max_length}")
    return text


def _longest_match(parsed: Any, where: str) -> str:
    """The longest (by bytes) text the parsed regex matches."""
    out = []
    for op, arg in parsed:
        name = str(op)
        if name == "AT":
            continue
        if name == "LITERAL":
            out.append(chr(arg))
        elif name in ("NOT_LITERAL", "ANY"):
            out.append(WIDE_CHAR)
        elif name == "IN":
            out.append(_widest_in_set(arg, where))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            if high == sre.MAXREPEAT:
                raise UnboundedSchema(f"{where}: the pattern has an unbounded repeat (* or +); use {{0,n}}")
            out.append(_longest_match(sub, where) * high)
        elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
            out.append(_longest_match(arg[-1], where))
        elif name == "BRANCH":
            out.append(_widest([_longest_match(alternative, where) for alternative in arg[1]]))
        else:
            raise UnboundedSchema(f"{where}: the pattern uses {name}, which is not measured; use plain classes")
    return "".join(out)


def _widest_in_set(items: list[tuple[Any, Any]], where: str) -> str:
    chars = []
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            return WIDE_CHAR
        if name == "LITERAL":
            chars.append(chr(arg))
        elif name == "RANGE":
            chars.append(chr(arg[1]))
        else:
            raise UnboundedSchema(f"{where}: the pattern's class uses {name}; list the characters or ranges")
    return _widest(chars)
