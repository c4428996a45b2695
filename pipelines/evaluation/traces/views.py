"""The views that make a team's method readable, shown above a sample's steps, built from the rows
the teams really write (recorded in ``tests/evaluation/recorded/``) and the sample's row of the
team's ``predictions.jsonl`` (``record``) when there is one:

- tagging: the label, the split (evaluated or generated), the question and the definition (the
  predictions row, with the pair's texts added by the report) and every system's verdict, with its
  outcome (the ``team`` / ``aggregate`` row, the single LLM's parsed ``verdict``, the predictions row);
- KGC: the sentence and its gold items (predictions row), then the rounds side by side per
  expert (``round`` + ``expert``: the ``kept`` answer, else ``parsed.items``) with the changes;
- RAM2C: the topic and the student's persona (the student prompt's persona line); per turn: the final pair
  (chosen: the last group's ``synthesizer`` reply; rejected: the
  ``drafter``'s) with the quality gates' verdict (``gates`` row), the reply after each group, and
  each group's retrieved documents with every expert's vote (``reflection`` rows: ``documents:
  [{document, votes: {expert: bool}, share, accepted}]``; ``retrieval`` rows: ``parsed.hits``).
"""

from __future__ import annotations

import difflib
import html
import json
from collections.abc import Mapping, Sequence
from typing import Any


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def pretty(value: Any) -> str:
    """Text as it is; a list one compact item per line; anything else as indented JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join("  " + json.dumps(v, ensure_ascii=False, default=str) for v in value) + "\n]"
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def pre(value: Any, cls: str = "") -> str:
    return f'<pre class="{cls}">{esc(pretty(value))}</pre>'


def _verdict(value: Any) -> str:
    if value is None:
        return "no verdict (failed)"
    return "yes" if bool(value) else "no"


SPLITS = {
    "evaluation": "evaluated (evaluation split: scored)",
    "generation": "generated (generation split: the team's run for SFT rows, not scored)",
}
PERSONA_LINES = ("You are:", "你是：")  # the student prompt's persona line (ram2c/agents/student.*.j2)


def persona_line(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The persona the simulated student played, as its prompt gave it (``grade 6, curious and
    playful, likes cooking, reads at grade level``); None when no student prompt is traced."""
    for row in rows:
        if row.get("agent") != "student" or not isinstance(row.get("prompt"), list):
            continue
        for message in row["prompt"]:
            for line in str((message or {}).get("content", "")).splitlines():
                for start in PERSONA_LINES:
                    if line.startswith(start):
                        return line.removeprefix(start).strip().rstrip(".。")
    return None


def tagging_html(rows: Sequence[Mapping[str, Any]], record: Mapping[str, Any] | None) -> str:
    """Label and verdicts first: one line per system (team from its aggregate row, others from
    their parsed ``verdict``, the predictions row where the trace has none)."""
    label = next((r["label"] for r in rows if "label" in r), (record or {}).get("label"))
    if label is None:
        return ""
    verdicts: dict[str, Any] = dict((record or {}).get("predictions") or {})
    for row in rows:
        parsed = row.get("parsed")
        if isinstance(parsed, Mapping) and "verdict" in parsed and row.get("role") in ("aggregate", "single_llm"):
            verdicts[str(row.get("system") or row.get("agent"))] = parsed["verdict"]
    cells = []
    for system, verdict in verdicts.items():
        outcome = "failed" if verdict is None else ("correct" if bool(verdict) == bool(label) else "wrong")
        cells.append(f'<tr><td>{esc(system)}</td><td>{_verdict(verdict)}</td>'
                     f'<td><span class="badge {outcome}">{outcome}</span></td></tr>')  # fmt: skip
    record = record or {}
    knowledge = record.get("knowledge_id")
    head = f"<p><b>Label</b>: {_verdict(label)}" + (f" · knowledge <code>{esc(knowledge)}</code>" if knowledge else "")
    split = next((r["split"] for r in rows if r.get("split")), record.get("split"))
    head += f" · {esc(SPLITS.get(str(split), split))}" if split else ""
    pair = "".join(f"<p><b>{name}</b>: {esc(record[key])}</p>" for key, name in (("question", "Question"),
                   ("definition", "Definition")) if record.get(key))  # fmt: skip
    table = f'<table class="verdicts"><tr><th>system</th><th>verdict</th><th></th></tr>{"".join(cells)}</table>'
    return f'<section class="first"><h3>Label and verdicts</h3>{head}</p>{pair}{table}</section>'


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


def kgc_gold_html(record: Mapping[str, Any] | None) -> str:
    """The sentence and its gold items (the predictions row), the first thing to compare against."""
    if not record or "gold" not in record:
        return ""
    where = " · ".join(esc(record.get(k)) for k in ("dataset", "task", "language") if record.get(k))
    finals = "".join(
        f"<h4>{esc(system)}: final items ({len(found['rounds'][-1])})</h4>{pre(found['rounds'][-1])}"
        for system, found in (record.get("predictions") or {}).items()
        if isinstance(found, Mapping) and found.get("rounds")
    )
    return (f'<section class="first"><h3>Sentence and gold</h3><p class="meta">{where}</p>{pre(record.get("text", ""))}'
            f'<h4>Gold items ({len(record["gold"])})</h4>{pre(record["gold"])}{finals}</section>')  # fmt: skip


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
            tds.append(f"<td>{failed}{pre(round_answer(row))}<div class='changes'>{change}</div></td>")
        body.append(f"<tr><th>round {r}</th>{''.join(tds)}</tr>")
    return f'<h3>Rounds per expert</h3><table class="rounds"><tr><th></th>{head}</tr>{"".join(body)}</table>'


def _text(value: Any) -> Any:
    """A reply's text: the string itself, or the ``reply`` of a ``{analysis, reply}`` result."""
    if isinstance(value, Mapping) and "reply" in value:
        return value["reply"]
    return value


def _gate(rows: Sequence[Mapping[str, Any]], pair_id: str) -> str:
    for row in rows:
        parsed = row.get("parsed")
        if row.get("agent") == "gates" and isinstance(parsed, Mapping):
            if pair_id in (parsed.get("kept") or []):
                return '<span class="badge kept">kept</span>'
            if pair_id in (parsed.get("dropped") or {}):
                return f'<span class="badge dropped">dropped: {esc(parsed["dropped"][pair_id])}</span>'
    return ""


def _documents_html(rows: Sequence[Mapping[str, Any]]) -> str:
    """One group's retrieved documents with every expert's vote and whether the group accepted it."""
    hits = {}
    for row in rows:
        if row.get("agent") == "retrieval" and isinstance(row.get("parsed"), Mapping):
            hits.update({str(h.get("id")): h for h in row["parsed"].get("hits") or []})
    verdicts = {}
    for row in rows:
        if row.get("agent") == "reflection" and isinstance(row.get("parsed"), Mapping):
            verdicts.update({str(d.get("document")): d for d in row["parsed"].get("documents") or []})
    if not hits and not verdicts:
        return ""
    body = []
    for doc in dict.fromkeys([*hits, *verdicts]):
        hit, verdict = hits.get(doc, {}), verdicts.get(doc, {})
        votes = ", ".join(f"{esc(e)}: {'yes' if v else 'no'}" for e, v in (verdict.get("votes") or {}).items()) or "-"
        accepted = "-" if "accepted" not in verdict else ("accepted" if verdict["accepted"] else "rejected")
        text = str(hit.get("text", ""))
        body.append(
            f"<tr><td>{esc(doc)}</td><td>{esc(hit.get('kind', ''))}</td><td>{esc(hit.get('score', ''))}</td>"
            f"<td>{votes}</td><td>{accepted}</td><td>{esc(text[:400])}{'…' if len(text) > 400 else ''}</td></tr>"
        )
    return ('<table class="hits"><tr><th>doc</th><th>kind</th><th>score</th><th>votes</th><th>group</th>'
            f'<th>text</th></tr>{"".join(body)}</table>')  # fmt: skip


def ram2c_html(rows: Sequence[Mapping[str, Any]], record: Mapping[str, Any] | None = None) -> str:
    """Per turn: the final pair and its gate verdict first, then the reply after each group, then
    each group's documents with the experts' votes."""
    turns = sorted({r["turn"] for r in rows if isinstance(r.get("turn"), int)})
    if not turns:
        return ""
    sample = str(rows[0].get("sample_id", ""))
    topic = f"<p><b>Topic</b>: {esc(record['topic'])}</p>" if record and record.get("topic") else ""
    persona, who = persona_line(rows), (record or {}).get("student")
    if persona or who:
        topic += f"<p><b>Student persona</b>{f' {esc(who)}' if who else ''}: {esc(persona or 'not traced')}</p>"
    parts = [topic]
    for turn in turns:
        mine = [r for r in rows if r.get("turn") == turn]
        first = {str(r.get("agent")): r for r in mine if r.get("agent") in ("student", "drafter")}
        groups = list(dict.fromkeys(str(r["group"]) for r in mine if r.get("group") is not None))
        replies = {g: _text(r.get("parsed")) for g in groups for r in mine
                   if r.get("group") == g and r.get("agent") == "synthesizer" and r.get("ok")}  # fmt: skip
        rejected = _text((first.get("drafter") or {}).get("parsed"))
        chosen = replies[groups[-1]] if groups and groups[-1] in replies else None
        pair = (f"<div class='groups'><div class='group'><h4>chosen (after {esc(groups[-1] if groups else '-')})</h4>"
                f"{pre(chosen if chosen is not None else 'no reply (a step failed)')}</div>"
                f"<div class='group'><h4>rejected (the draft)</h4>{pre(rejected)}</div></div>")  # fmt: skip
        student = first.get("student", {}).get("parsed")
        parts.append(
            f'<section class="first"><h3>Turn {turn}: final pair {_gate(rows, f"{sample}-t{turn}")}</h3>'
            f"{'<h4>student</h4>' + pre(_text(student)) if student is not None else ''}{pair}</section>"
        )
        if replies:
            steps = "".join(f"<div class='group'><h4>after {esc(g)}</h4>{pre(r)}</div>" for g, r in replies.items())
            parts.append(f"<h3>Turn {turn}: reply after each group</h3><div class='groups'>{steps}</div>")
        for group in groups:
            table = _documents_html([r for r in mine if r.get("group") == group])
            if table:
                parts.append(f"<h4>Turn {turn}, group {esc(group)}: documents and votes</h4>{table}")
    return "".join(parts)


def evaluate_html(record: Mapping[str, Any] | None) -> str:
    """An evaluate comparison's item (:mod:`pipelines.evaluation.traces.evaluate`): the prompt, both
    replies side by side, then every judgment (judge, dimension, where the system's reply stood, the
    choice and what it means for the system; a tie says it had no judge call)."""
    if not record or "replies" not in record:
        return ""
    prompt = record.get("prompt") or {}
    head = "".join(f"<p><b>{name}</b>: {esc(prompt[key])}</p>" for key, name in (("topic", "Topic"),
                   ("answer", "Student's answer")) if prompt.get(key))  # fmt: skip
    replies = "".join(
        f"<div class='group'><h4>{esc(name)}</h4>{pre(text if text is not None else 'no reply')}</div>"
        for name, text in record["replies"].items()
    )
    body = "".join(
        f"<tr><td>{esc(j.get('judge'))}</td><td>{esc(j.get('dimension'))}</td><td>{esc(j.get('system_position'))}</td>"
        f"<td>{esc(j.get('choice') or 'no verdict')}</td><td>{esc(j.get('outcome') or '-')}</td>"
        f"<td>{'tie: no judge call' if j.get('tie') else esc(j.get('error') or '')}</td></tr>"
        for j in record.get("judgments") or []
    )
    table = ('<table class="verdicts"><tr><th>judge</th><th>dimension</th><th>system at</th><th>choice</th>'
             f"<th>for the system</th><th></th></tr>{body}</table>")  # fmt: skip
    return (f'<section class="first"><h3>{esc(record.get("comparison", ""))}: both replies and the verdicts</h3>'
            f"{head}<div class='groups'>{replies}</div>{table}</section>")  # fmt: skip
