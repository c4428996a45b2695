"""A random instance of a JSON schema, as a constrained decoder would write one.

``sample(schema, rng, words)`` returns a Python value valid for ``schema`` (checked against
``jsonschema`` in the tests for every schema the teams send). It reads what the teams' pydantic
models and hand-written schemas use: local ``$ref`` into ``$defs``/``definitions``, ``anyOf`` /
``oneOf`` (one branch), ``allOf`` (merged), ``enum``, ``const``, type lists, objects (``properties``,
``required``, ``additionalProperties``, ``patternProperties``, ``min``/``maxProperties``), arrays
(``items``, ``prefixItems``, ``min``/``maxItems``, ``uniqueItems``), strings (``minLength``,
``maxLength``, ``pattern``: generated from Python's regex parser and checked with ``re.search``),
numbers (``minimum``/``maximum``, exclusive bounds, ``multipleOf``), booleans and null.

Strings are filler text drawn from ``words`` (English or Chinese, picked by the caller from the
prompt's script), never holding a quote, a backslash or a control character (xgrammar admits no
escape in a bounded string): half to all of a tight ``maxLength`` (up to 120 characters), else
15 to 90 words cut to ``maxLength``, as a model writes a sentence or a short paragraph. A string
property named ``question`` ends with a question mark (what a prompt asking for a question gets).
"""

from __future__ import annotations

import math
import random
import re
import re._parser as sre  # Python 3.11+
from typing import Any

SAFE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,-_"
"""Characters a negated regex class or ``.`` draws from."""
UNBOUNDED_REPEAT = 4  # extra repeats drawn for * and + (and {m,})
FREE_WORDS = (15, 90)  # words of a string without a tight maxLength
TIGHT_CHARS = 120  # a maxLength up to this is filled to half..all of it; a looser one holds FREE_WORDS words
MAX_TRIES = 50


class UnsupportedSchema(ValueError):
    """A schema (or pattern) this sampler cannot satisfy; the message names the node."""


def sample(schema: dict[str, Any], rng: random.Random, words: list[str]) -> Any:
    """A random value valid for ``schema`` (see the module docstring)."""
    return _Sampler(schema, rng, words).value(schema, "$")


class _Sampler:
    def __init__(self, root: dict[str, Any], rng: random.Random, words: list[str]):
        self.root = root
        self.rng = rng
        self.words = words

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        seen = 0
        while "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#"):
                raise UnsupportedSchema(f"$ref {ref!r}: only local references")
            target: Any = self.root
            for part in filter(None, ref[1:].split("/")):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **rest}
            seen += 1
            if seen > 64:
                raise UnsupportedSchema(f"$ref {ref!r} does not resolve to a schema")
        return node

    def value(self, node: Any, where: str) -> Any:
        if node is True or node == {}:
            return self.text(None, None)
        if node is False:
            raise UnsupportedSchema(f"{where}: the schema false admits nothing")
        node = self.resolve(node)
        if "allOf" in node:
            merged = {k: v for k, v in node.items() if k != "allOf"}
            for part in node["allOf"]:
                merged = _merge(merged, self.resolve(part))
            return self.value(merged, where)
        for key in ("anyOf", "oneOf"):
            if key in node:
                branches = list(node[key])
                rest = {k: v for k, v in node.items() if k != key}
                branch = self.resolve(self.rng.choice(branches))
                return self.value(_merge(rest, branch) if rest else branch, where)
        if "const" in node:
            return node["const"]
        if "enum" in node:
            if not node["enum"]:
                raise UnsupportedSchema(f"{where}: an empty enum")
            return self.rng.choice(node["enum"])
        kind = node.get("type")
        if isinstance(kind, list):
            kind = self.rng.choice(kind)
        if kind is None:
            kind = _implied_type(node)
        if kind == "object":
            return self.obj(node, where)
        if kind == "array":
            return self.array(node, where)
        if kind == "string":
            return self.string(node, where)
        if kind == "integer":
            return self.number(node, where, integer=True)
        if kind == "number":
            return self.number(node, where, integer=False)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        raise UnsupportedSchema(f"{where}: unknown type {kind!r}")

    def obj(self, node: dict[str, Any], where: str) -> dict[str, Any]:
        properties = node.get("properties") or {}
        required = set(node.get("required") or [])
        out: dict[str, Any] = {}
        for name, sub in properties.items():  # schema order, as a constrained decoder writes them
            if name in required or self.rng.random() < 0.7:
                value = self.value(sub, f"{where}.{name}")
                if name == "question" and isinstance(value, str) and value and not value.endswith("?"):
                    value = value[:-1] + "?" if len(value) > 1 else value
                out[name] = value
        extra = node.get("additionalProperties", True)
        patterns = node.get("patternProperties") or {}
        low = node.get("minProperties", 0)
        high = node.get("maxProperties", max(low, len(out) + (3 if (patterns or extra not in (False, None)) else 0)))
        wanted = self.rng.randint(min(low, high), high) if not properties else max(low, len(out))
        tries = 0
        while len(out) < wanted and tries < MAX_TRIES:
            tries += 1
            if patterns:
                pattern, sub = self.rng.choice(list(patterns.items()))
                key = self.pattern_text(pattern, None, None, f"{where}[key]")
            elif extra is not False:
                key, sub = self.rng.choice(self.words), extra if isinstance(extra, dict) else {}
                key = re.sub(r"\W", "_", key) or "key"
            else:
                break
            if key not in out:
                out[key] = self.value(sub, f"{where}.{key}")
        return out

    def array(self, node: dict[str, Any], where: str) -> list[Any]:
        prefix = node.get("prefixItems") or []
        low = node.get("minItems", 0)
        high = node.get("maxItems", max(low, len(prefix)) + 3)
        count = self.rng.randint(max(low, min(len(prefix), high)), max(high, low))
        items = node.get("items", {} if not prefix else False)
        out = [self.value(prefix[i], f"{where}[{i}]") for i in range(min(count, len(prefix)))]
        unique = node.get("uniqueItems", False)
        tries = 0
        while len(out) < count and items is not False and tries < MAX_TRIES * 4:
            tries += 1
            value = self.value(items, f"{where}[{len(out)}]")
            if unique and value in out:
                continue
            out.append(value)
        if len(out) < low:
            raise UnsupportedSchema(f"{where}: cannot draw {low} distinct items")
        return out

    def string(self, node: dict[str, Any], where: str) -> str:
        low, high = node.get("minLength"), node.get("maxLength")
        if "pattern" in node:
            return self.pattern_text(node["pattern"], low, high, where)
        return self.text(low, high)

    def text(self, low: int | None, high: int | None) -> str:
        low = low or 0
        if high is None or high > TIGHT_CHARS:
            out = self._words(self.rng.randint(*FREE_WORDS))
            if high is not None and len(out) > high:
                out = out[:high].rstrip() or out[:high]
        else:
            out = self._fill(self.rng.randint(max(low, (high + 1) // 2), high) if high > 0 else 0)
        return out + "x" * (low - len(out)) if len(out) < low else out

    def _words(self, n: int) -> str:
        joiner = "" if self.words and len(self.words[0]) == 1 and ord(self.words[0]) > 0x2E80 else " "
        return joiner.join(self.rng.choice(self.words) for _ in range(n))

    def _fill(self, target: int) -> str:
        """Filler text of exactly ``target`` characters that neither starts nor ends with a space."""
        if target <= 0:
            return ""
        parts, size = [], 0
        cjk = bool(self.words) and ord(self.words[0][0]) > 0x2E80
        while size < target:
            word = self.rng.choice(self.words)
            parts.append(word if cjk or not parts else " " + word)
            size += len(parts[-1])
        out = "".join(parts)[:target]
        return out[:-1] + "s" if out.endswith(" ") else out

    def pattern_text(self, pattern: str, low: int | None, high: int | None, where: str) -> str:
        try:
            parsed = sre.parse(pattern)
            compiled = re.compile(pattern)
        except re.error as exc:
            raise UnsupportedSchema(f"{where}: pattern {pattern!r} does not compile ({exc})") from None
        for _ in range(MAX_TRIES):
            text = self._match(parsed)
            if compiled.search(text) and (low is None or len(text) >= low) and (high is None or len(text) <= high):
                return text
        raise UnsupportedSchema(f"{where}: no text of pattern {pattern!r} within length [{low}, {high}] found")

    def _match(self, parsed: Any) -> str:
        out = []
        for op, arg in parsed:
            name = str(op)
            if name in ("AT", "ASSERT", "ASSERT_NOT"):
                continue
            if name == "LITERAL":
                out.append(chr(arg))
            elif name == "NOT_LITERAL":
                out.append(self.rng.choice([c for c in SAFE if ord(c) != arg]))
            elif name == "ANY":
                out.append(self.rng.choice(SAFE))
            elif name == "IN":
                out.append(self._in_set(arg))
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                low, high, sub = arg
                high = low + UNBOUNDED_REPEAT if high == sre.MAXREPEAT else high
                out.extend(self._match(sub) for _ in range(self.rng.randint(low, high)))
            elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
                out.append(self._match(arg[-1]))
            elif name == "BRANCH":
                out.append(self._match(self.rng.choice(arg[1])))
            elif name == "CATEGORY":
                out.append(self._category(str(arg)))
            else:
                raise UnsupportedSchema(f"pattern element {name} is not generated")
        return "".join(out)

    def _in_set(self, items: list[tuple[Any, Any]]) -> str:
        negate = bool(items) and str(items[0][0]) == "NEGATE"
        chars: list[str] = []
        for op, arg in items[1:] if negate else items:
            name = str(op)
            if name == "LITERAL":
                chars.append(chr(arg))
            elif name == "RANGE":
                lo, hi = arg
                chars.extend(chr(c) for c in range(lo, min(hi, lo + 200) + 1))
            elif name == "CATEGORY":
                chars.extend(_CATEGORY_CHARS.get(str(arg), ""))
        if negate:
            excluded = set(chars)
            return self.rng.choice([c for c in SAFE if c not in excluded] or ["~"])
        return self.rng.choice(chars)

    def _category(self, name: str) -> str:
        return self.rng.choice(_CATEGORY_CHARS.get(name) or SAFE)

    def number(self, node: dict[str, Any], where: str, *, integer: bool) -> int | float:
        low, high = node.get("minimum"), node.get("maximum")
        xlow, xhigh = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
        step = node.get("multipleOf")
        lo = -1000.0 if low is None and xlow is None else max(v for v in (low, xlow) if v is not None)
        hi = lo + 2000.0 if high is None and xhigh is None else min(v for v in (high, xhigh) if v is not None)
        if integer or step:
            unit = step or 1
            first = math.ceil(lo / unit) + (1 if xlow is not None and math.ceil(lo / unit) * unit <= xlow else 0)
            last = math.floor(hi / unit) - (1 if xhigh is not None and math.floor(hi / unit) * unit >= xhigh else 0)
            if first > last:
                raise UnsupportedSchema(f"{where}: no multiple of {unit} in [{lo}, {hi}]")
            value = self.rng.randint(first, last) * unit
            return int(value) if integer or float(value).is_integer() and isinstance(unit, int) else value
        value = round(self.rng.uniform(lo, hi), 3)
        if (xlow is not None and value <= xlow) or (xhigh is not None and value >= xhigh) or not lo <= value <= hi:
            value = (lo + hi) / 2
        return value


_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0123456789",
    "CATEGORY_NOT_DIGIT": "abcdefxyz",
    "CATEGORY_WORD": "abcdefghijklmnopqrstuvwxyz0123456789_",
    "CATEGORY_NOT_WORD": " .,-",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": "abcdefxyz0123",
}


def _implied_type(node: dict[str, Any]) -> str:
    if "properties" in node or "additionalProperties" in node or "patternProperties" in node:
        return "object"
    if "items" in node or "prefixItems" in node:
        return "array"
    if {"minLength", "maxLength", "pattern"} & set(node):
        return "string"
    if {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & set(node):
        return "number"
    return "string"


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``a`` and ``b`` together (``allOf``): properties and required lists joined, b's other keys win."""
    out = {**a, **b}
    if "properties" in a and "properties" in b:
        out["properties"] = {**a["properties"], **b["properties"]}
    if "required" in a and "required" in b:
        out["required"] = sorted(set(a["required"]) | set(b["required"]))
    return out
