"""One sample's whole story from its trace rows, as HTML: every step in order, plus the views
that make a team's method readable.

Rows have the shared trace shape (:meth:`pipelines.agents.AgentRecord.to_trace`: ``sample_id,
agent, role, prompt, reply, parsed, ok, error, usage, cached, calls``; non-LLM steps carry
``inputs`` and ``result``); extra keys are kept and shown. Keys with a special view:

- ``round`` (+ ``expert``, else ``agent``): KGC rounds side by side per expert (the ``kept``
  answer when the row has one, else ``parsed.items``, else ``parsed``), with what changed since
  the expert's previous round;
- ``hits`` in ``result`` or ``parsed`` (a retrieval step; ``SampleTrace.add_result`` stores the
  result as ``parsed``), ``votes`` (``{doc_id: vote}`` on a voter's row, or on a hit), and
  ``group`` with ``reply_after`` / ``revision`` / ``response`` (on the row, its ``parsed`` or its
  ``result``): RAM2C's retrieved documents with every vote, and the reply after each group;
- ``chosen`` / ``rejected`` (on the row, its ``parsed`` or its ``result``): the final pair;
- ``code`` and ``sandbox`` (``stdout, stderr, exit_code, ...``): the numerical judge's program and
  its sandbox output.

The sample's outcome (``correct`` / ``wrong`` / ``failed`` / ``unscored``), in this order of
evidence: a row's ``outcome``; a row's ``correct`` boolean; a row with ``label`` and a parsed
``verdict`` (the tagging team's aggregate row); ``failed`` if a step failed; else ``unscored``.
"""

from __future__ import annotations

import difflib
import html
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

OUTCOMES = ("correct", "wrong", "failed", "unscored")
REPLY_KEYS = ("reply_after", "revision", "response")
SHOWN_KEYS = {
    "sample_id", "agent", "role", "prompt", "reply", "parsed", "ok", "error", "usage", "cached", "calls",
    "replies", "code", "sandbox", "inputs", "result", "latency_s", "choices",
}  # fmt: skip


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def pretty(value: Any) -> str:
    """Text as it is; a list one compact item per line; anything else as indented JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join("  " + json.dumps(v, ensure_ascii=False, default=str) for v in value) + "\n]"
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _find(row: Mapping[str, Any], key: str) -> Any:
    for holder in (row, row.get("parsed"), row.get("result")):
        if isinstance(holder, Mapping) and key in holder:
            return holder[key]
    return None


def sample_outcome(rows: Sequence[Mapping[str, Any]]) -> str:
    """``correct`` / ``wrong`` / ``failed`` / ``unscored`` (see the module docstring)."""
    explicit = [r["outcome"] for r in rows if r.get("outcome") in OUTCOMES]
    if explicit:
        return explicit[-1]
    judged = [r["correct"] for r in rows if isinstance(r.get("correct"), bool)]
    if judged:
        return "correct" if judged[-1] else "wrong"
    for row in reversed(rows):
        verdict = row["parsed"].get("verdict") if isinstance(row.get("parsed"), Mapping) else None
        if "label" in row and isinstance(verdict, (bool, int)):
            return "correct" if bool(verdict) == bool(row["label"]) else "wrong"
    if any(r.get("ok") is False for r in rows):
        return "failed"
    return "unscored"


def _pre(value: Any, cls: str = "") -> str:
    return f'<pre class="{cls}">{esc(pretty(value))}</pre>'


def _tags(row: Mapping[str, Any]) -> str:
    extra = {k: v for k, v in row.items() if k not in SHOWN_KEYS and not isinstance(v, (dict, list))}
    return " ".join(f'<span class="tag">{esc(k)}={esc(v)}</span>' for k, v in extra.items())


def _sandbox_html(row: Mapping[str, Any]) -> str:
    parts = []
    if row.get("code"):
        parts.append(f"<h4>Program</h4>{_pre(row['code'], 'code')}")
    box = row.get("sandbox")
    if isinstance(box, Mapping):
        keys = ("exit_code", "timed_out", "killed_reason", "verdict")
        status = ", ".join(f"{k}={box.get(k)}" for k in keys if k in box)
        parts.append(f"<h4>Sandbox ({esc(status)})</h4>")
        parts.append(f"<p>stdout</p>{_pre(box.get('stdout', ''))}<p>stderr</p>{_pre(box.get('stderr', ''))}")
    return "".join(parts)


def _hits_html(hits: Sequence[Mapping[str, Any]], votes: Mapping[str, list[tuple[str, Any]]]) -> str:
    body = []
    for hit in hits:
        doc = str(hit.get("id", ""))
        cast = list(votes.get(doc, []))
        if "votes" in hit:
            cast.append(("hit", hit["votes"]))
        shown = ", ".join(f"{esc(who)}: {esc(v)}" for who, v in cast) or "-"
        text = str(hit.get("text", ""))
        body.append(
            f"<tr><td>{esc(doc)}</td><td>{esc(hit.get('kind', ''))}</td><td>{esc(hit.get('score', ''))}</td>"
            f"<td>{shown}</td><td>{esc(text[:400])}{'…' if len(text) > 400 else ''}</td></tr>"
        )
    return (
        '<table class="hits"><tr><th>doc</th><th>kind</th><th>score</th><th>votes</th><th>text</th></tr>'
        + "".join(body)
        + "</table>"
    )


def _row_html(index: int, row: Mapping[str, Any], votes: Mapping[str, list[tuple[str, Any]]]) -> str:
    ok = row.get("ok")
    status = "ok" if ok else ("failed" if ok is False else "")
    usage = row.get("usage") or {}
    usage_text = ", ".join(f"{k} {v}" for k, v in usage.items()) if isinstance(usage, Mapping) else esc(usage)
    meta = f"calls {row.get('calls', '-')}, {usage_text or 'no usage'}{', cached' if row.get('cached') else ''}"
    parts = [
        f'<div class="step {status}"><div class="head"><b>{index}. {esc(row.get("agent"))}</b> · '
        f'{esc(row.get("role"))} <span class="status">{status}</span> <span class="meta">{esc(meta)}</span> '
        f"{_tags(row)}</div>"
    ]
    if row.get("error"):
        parts.append(f'<p class="error">{esc(row["error"])}</p>')
    if isinstance(row.get("prompt"), list):
        messages = "".join(
            f'<p class="msg-role">{esc(m.get("role"))}</p>{_pre(m.get("content"))}'
            for m in row["prompt"]
            if isinstance(m, Mapping)
        )
        parts.append(f"<details><summary>prompt ({len(row['prompt'])} messages)</summary>{messages}</details>")
    if row.get("replies") and len(row["replies"]) > 1:
        tries = "".join(f"<p>attempt {i + 1}</p>{_pre(r)}" for i, r in enumerate(row["replies"]))
        parts.append(f"<details><summary>all {len(row['replies'])} replies</summary>{tries}</details>")
    if row.get("reply") is not None:
        parts.append(f"<h4>Reply</h4>{_pre(row['reply'])}")
    if row.get("inputs") is not None:
        parts.append(f"<h4>Inputs</h4>{_pre(row['inputs'])}")
    for key, heading in (("parsed", "Parsed"), ("result", "Result")):
        value = row.get(key)
        if isinstance(value, Mapping) and isinstance(value.get("hits"), list):
            rest = {k: v for k, v in value.items() if k != "hits"}
            parts.append(f"<h4>Retrieved documents</h4>{_hits_html(value['hits'], votes)}")
            parts.append(_pre(rest) if rest else "")
        elif value is not None:
            parts.append(f"<h4>{heading}</h4>{_pre(value)}")
    parts.append(_sandbox_html(row))
    others = {k: v for k, v in row.items() if k not in SHOWN_KEYS and isinstance(v, (dict, list))}
    if others:
        parts.append(f"<details><summary>more fields</summary>{_pre(others)}</details>")
    parts.append("</div>")
    return "".join(parts)


def _items(value: Any) -> list[str] | None:
    """A parsed result as a list of canonical item strings, when it is list-like."""
    if isinstance(value, list):
        return [json.dumps(v, ensure_ascii=False, sort_keys=True) for v in value]
    if isinstance(value, Mapping) and value and all(isinstance(v, list) for v in value.values()):
        return [f"{k}: {json.dumps(v, ensure_ascii=False, sort_keys=True)}" for k, vs in value.items() for v in vs]
    return None


def change_html(previous: Any, current: Any) -> str:
    """What changed between an expert's two rounds: added / removed items, or a line diff."""
    before, after = _items(previous), _items(current)
    if before is not None and after is not None:
        added = [x for x in after if x not in before]
        removed = [x for x in before if x not in after]
        lines = [f'<div class="add">+ {esc(x)}</div>' for x in added]
        lines += [f'<div class="del">− {esc(x)}</div>' for x in removed]
        return "".join(lines) or '<div class="same">no change</div>'
    diff = difflib.unified_diff(pretty(previous).splitlines(), pretty(current).splitlines(), lineterm="", n=0)
    lines = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
    if not lines:
        return '<div class="same">no change</div>'
    return "".join(f'<div class="{"add" if x.startswith("+") else "del"}">{esc(x)}</div>' for x in lines)


def round_answer(row: Mapping[str, Any]) -> Any:
    """An expert's answer in a round: ``kept`` (after a schema filter), else ``parsed.items``, else ``parsed``."""
    if row.get("kept") is not None:
        return row["kept"]
    parsed = row.get("parsed")
    if isinstance(parsed, Mapping) and "items" in parsed:
        return parsed["items"]
    return parsed


def rounds_html(rows: Sequence[Mapping[str, Any]]) -> str:
    """KGC rounds side by side: one row per round, one column per expert, with the changes."""
    cells: dict[tuple[int, str], Mapping[str, Any]] = {}
    for row in rows:
        if isinstance(row.get("round"), int):
            cells[(row["round"], str(row.get("expert") or row.get("agent")))] = row
    if not cells:
        return ""
    rounds = sorted({r for r, _ in cells})
    experts = list(dict.fromkeys(e for _, e in cells))
    head = "".join(f"<th>{esc(e)}</th>" for e in experts)
    body = []
    for r in rounds:
        tds = []
        for e in experts:
            row = cells.get((r, e))
            if row is None:
                tds.append("<td>-</td>")
                continue
            earlier = [cells[(p, e)] for p in rounds if p < r and (p, e) in cells]
            change = change_html(round_answer(earlier[-1]), round_answer(row)) if earlier else ""
            failed = "" if row.get("ok", True) else f"<p class='error'>{esc(row.get('error'))}</p>"
            tds.append(f"<td>{failed}{_pre(round_answer(row))}<div class='changes'>{change}</div></td>")
        body.append(f"<tr><th>round {r}</th>{''.join(tds)}</tr>")
    return f'<h3>Rounds per expert</h3><table class="rounds"><tr><th></th>{head}</tr>{"".join(body)}</table>'


def groups_html(rows: Sequence[Mapping[str, Any]]) -> str:
    """RAM2C: the reply after each group (last row of each ``group`` with a reply), and the final pair."""
    after: dict[str, Any] = {}
    for row in rows:
        reply = next((_find(row, k) for k in REPLY_KEYS if _find(row, k) is not None), None)
        if row.get("group") is not None and reply is not None:
            after[str(row["group"])] = reply
    parts = []
    if after:
        steps = "".join(f"<div class='group'><h4>after {esc(g)}</h4>{_pre(r)}</div>" for g, r in after.items())
        parts.append(f"<h3>Reply after each group</h3><div class='groups'>{steps}</div>")
    pairs = [(_find(r, "chosen"), _find(r, "rejected")) for r in rows]
    pairs = [p for p in pairs if p[0] is not None and p[1] is not None]
    if pairs:
        chosen, rejected = pairs[-1]
        parts.append(
            "<h3>Final pair</h3><div class='groups'>"
            f"<div class='group'><h4>chosen</h4>{_pre(chosen)}</div>"
            f"<div class='group'><h4>rejected</h4>{_pre(rejected)}</div></div>"
        )
    return "".join(parts)


def collect_votes(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    """``{doc_id: [(voter, vote), ...]}`` from rows carrying ``votes`` (on the row or its parsed)."""
    votes: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for row in rows:
        found = row.get("votes") if isinstance(row.get("votes"), Mapping) else _find(row, "votes")
        if isinstance(found, Mapping):
            voter = str(row.get("expert") or row.get("agent") or "?")
            for doc, vote in found.items():
                votes[str(doc)].append((voter, vote))
    return votes


def story_html(rows: Sequence[Mapping[str, Any]]) -> str:
    """The views (rounds, groups and pair) first, then every step in order."""
    votes = collect_votes(rows)
    steps = "".join(_row_html(i + 1, row, votes) for i, row in enumerate(rows))
    return f"{rounds_html(rows)}{groups_html(rows)}<h3>Steps in order</h3>{steps}"
