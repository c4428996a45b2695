"""One sample's whole story from its trace rows, as HTML: the team's view first
(:mod:`pipelines.evaluation.traces.views`: tagging's label and verdicts, KGC's gold and rounds,
RAM2C's final pair, group replies and votes, an evaluate comparison's replies and verdicts), then
every step in order.

Rows have the shared trace shape (:meth:`pipelines.agents.AgentRecord.to_trace`: ``sample_id,
agent, role, prompt, reply, parsed, ok, error, usage, cached, calls``; non-LLM steps carry
``inputs`` and ``parsed`` = their result); extra keys are kept and shown. A step with ``code`` and
``sandbox`` (``stdout, stderr, exit_code, ...``) shows the numerical judge's program and its
sandbox output; a ``parsed.hits`` list is shown as the retrieved documents.

The sample's outcome, in this order of evidence: a row's ``outcome`` (tagging's ``aggregate`` and
KGC's ``final`` rows); a row's ``correct`` boolean; a row with ``label`` and a parsed ``verdict``;
RAM2C's ``gates`` row (``kept`` when every pair was kept, else ``dropped``); ``failed`` if a step
failed; else ``unscored``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.evaluation.traces.views import (
    esc,
    evaluate_html,
    kgc_gold_html,
    pre,
    ram2c_html,
    rounds_html,
    tagging_html,
)

OUTCOMES = ("correct", "wrong", "kept", "dropped", "failed", "unscored")
SHOWN_KEYS = {
    "sample_id", "agent", "role", "prompt", "reply", "parsed", "ok", "error", "usage", "cached", "calls",
    "replies", "code", "sandbox", "inputs", "result", "latency_s", "choices",
}  # fmt: skip


def sample_outcome(rows: Sequence[Mapping[str, Any]]) -> str:
    """One of :data:`OUTCOMES` (see the module docstring for the evidence read)."""
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
    gates = [r["parsed"] for r in rows if r.get("agent") == "gates" and isinstance(r.get("parsed"), Mapping)]
    if gates:
        return "dropped" if any(g.get("dropped") for g in gates) or not any(g.get("kept") for g in gates) else "kept"
    if any(r.get("ok") is False for r in rows):
        return "failed"
    return "unscored"


def _tags(row: Mapping[str, Any]) -> str:
    extra = {k: v for k, v in row.items() if k not in SHOWN_KEYS and not isinstance(v, (dict, list))}
    return " ".join(f'<span class="tag">{esc(k)}={esc(v)}</span>' for k, v in extra.items())


def _sandbox_html(row: Mapping[str, Any]) -> str:
    parts = []
    if row.get("code"):
        parts.append(f"<h4>Program</h4>{pre(row['code'], 'code')}")
    box = row.get("sandbox")
    if isinstance(box, Mapping):
        keys = ("exit_code", "timed_out", "killed_reason", "verdict")
        status = ", ".join(f"{k}={box.get(k)}" for k in keys if k in box)
        parts.append(f"<h4>Sandbox ({esc(status)})</h4>")
        parts.append(f"<p>stdout</p>{pre(box.get('stdout', ''))}<p>stderr</p>{pre(box.get('stderr', ''))}")
    return "".join(parts)


def _hits_html(hits: Sequence[Mapping[str, Any]]) -> str:
    body = "".join(
        f"<tr><td>{esc(h.get('id', ''))}</td><td>{esc(h.get('kind', ''))}</td><td>{esc(h.get('score', ''))}</td>"
        f"<td>{esc(str(h.get('text', ''))[:400])}</td></tr>"
        for h in hits
    )
    return f'<table class="hits"><tr><th>doc</th><th>kind</th><th>score</th><th>text</th></tr>{body}</table>'


def _row_html(index: int, row: Mapping[str, Any]) -> str:
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
            f'<p class="msg-role">{esc(m.get("role"))}</p>{pre(m.get("content"))}'
            for m in row["prompt"]
            if isinstance(m, Mapping)
        )
        parts.append(f"<details><summary>prompt ({len(row['prompt'])} messages)</summary>{messages}</details>")
    if row.get("replies") and len(row["replies"]) > 1:
        tries = "".join(f"<p>attempt {i + 1}</p>{pre(r)}" for i, r in enumerate(row["replies"]))
        parts.append(f"<details><summary>all {len(row['replies'])} replies</summary>{tries}</details>")
    if row.get("reply") is not None:
        parts.append(f"<h4>Reply</h4>{pre(row['reply'])}")
    if row.get("inputs") is not None:
        parts.append(f"<h4>Inputs</h4>{pre(row['inputs'])}")
    for key, heading in (("parsed", "Parsed"), ("result", "Result")):
        value = row.get(key)
        if isinstance(value, Mapping) and isinstance(value.get("hits"), list):
            rest = {k: v for k, v in value.items() if k != "hits"}
            parts.append(f"<h4>Retrieved documents</h4>{_hits_html(value['hits'])}")
            parts.append(pre(rest) if rest else "")
        elif value is not None:
            parts.append(f"<h4>{heading}</h4>{pre(value)}")
    parts.append(_sandbox_html(row))
    others = {k: v for k, v in row.items() if k not in SHOWN_KEYS and isinstance(v, (dict, list))}
    if others:
        parts.append(f"<details><summary>more fields</summary>{pre(others)}</details>")
    parts.append("</div>")
    return "".join(parts)


def story_html(rows: Sequence[Mapping[str, Any]], record: Mapping[str, Any] | None = None) -> str:
    """The team's view (what a person needs first), then every step in order. ``record``: the
    sample's row of the team's ``predictions.jsonl`` (KGC's gold, tagging's label), when known."""
    views = tagging_html(rows, record) + kgc_gold_html(record) + rounds_html(rows) + ram2c_html(rows, record)
    views += evaluate_html(record)
    steps = "".join(_row_html(i + 1, row) for i, row in enumerate(rows))
    return f"{views}<h3>Steps in order</h3>{steps}"
