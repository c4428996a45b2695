"""``reports/traces.html``: a static, self-contained trace browser (no server, no network).

Per team a list of samples with their outcome (filter by the outcomes that team has: correct,
wrong, kept, dropped, failed, unscored); choosing one shows its whole story
(:func:`story.story_html`, the team's view first). Each sample has an address,
``traces.html#<team>/<sample id>`` (e.g. ``#ram2c/d0``): opening it selects the team and shows
the sample, and choosing a sample puts its address in the location bar. Large runs get a seeded
sample per team (stratified by outcome, so rare failures stay visible), not every row.

    write_trace_browser("reports/traces.html",
                        {"tagging": "data/generated/tagging/traces.jsonl", "kgc": rows, ...},
                        records={"kgc": "data/generated/kgc/predictions.jsonl"}, limit=200, seed=0)
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.evaluation.traces.story import OUTCOMES, sample_outcome, story_html
from pipelines.evaluation.traces.views import esc
from pipelines.io import atomic_open

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
header{padding:.6rem 1rem;border-bottom:1px solid #ccc;background:#fafafa;position:sticky;top:0}
#layout{display:grid;grid-template-columns:18rem 1fr;height:calc(100vh - 3.2rem)}
#list{overflow:auto;border-right:1px solid #ddd;margin:0;padding:0;list-style:none}
#list li{padding:.3rem .6rem;cursor:pointer;border-bottom:1px solid #eee}
#list li.active{background:#e6f0ff}
main{overflow:auto;padding:0 1rem 2rem}
.badge{font-size:.75rem;padding:0 .35rem;border-radius:3px;margin-left:.4rem}
.correct,.kept{background:#d7f5dd}.wrong,.dropped{background:#fde2c8}.failed{background:#f8d0d0}
.unscored{background:#e4e4e4}
section.first{border:2px solid #99b;border-radius:6px;padding:.2rem .8rem;margin:.6rem 0;background:#f7f8ff}
.step{border:1px solid #ccc;border-radius:5px;margin:.6rem 0;padding:.4rem .6rem}
.step.failed{border-color:#d66}
.tag{font-size:.75rem;background:#eef;border-radius:3px;padding:0 .3rem;margin-left:.3rem}
.meta{color:#666;font-size:.8rem}
.error{color:#a00}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.4rem;border-radius:3px;max-height:28rem;overflow:auto}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .4rem;vertical-align:top}
.add{color:#075e00}.del{color:#a00}.same{color:#777}
.groups{display:flex;gap:.8rem}.group{flex:1;min-width:0}
"""

SCRIPT = """
(function () {
  const team = document.getElementById('team');
  const filters = document.querySelectorAll('input[name=outcome]');
  const items = document.querySelectorAll('#list li');
  function outcome() { return document.querySelector('input[name=outcome]:checked').value; }
  function refresh() {
    const present = new Set();
    let shown = 0;
    items.forEach(function (li) {
      if (li.dataset.team === team.value) { present.add(li.dataset.outcome); }
      const visible = li.dataset.team === team.value && (outcome() === 'all' || li.dataset.outcome === outcome());
      li.hidden = !visible;
      if (visible) { shown += 1; }
    });
    filters.forEach(function (f) { f.parentElement.hidden = f.value !== 'all' && !present.has(f.value); });
    document.getElementById('shown').textContent = shown + ' shown';
  }
  function open(li, remember) {
    items.forEach(function (other) { other.classList.toggle('active', other === li); });
    document.querySelectorAll('main article').forEach(function (a) { a.hidden = a.id !== li.dataset.target; });
    document.getElementById('hint').hidden = true;
    if (remember) { history.replaceState(null, '', '#' + li.dataset.team + '/' + li.dataset.sample); }
  }
  function follow() {
    const address = decodeURIComponent(location.hash.slice(1));
    const slash = address.indexOf('/');
    if (slash < 0) { return; }
    const wanted = address.slice(0, slash), sample = address.slice(slash + 1);
    const li = Array.prototype.find.call(items, function (x) {
      return x.dataset.team === wanted && x.dataset.sample === sample;
    });
    if (!li) {
      document.getElementById('hint').textContent =
        'No sample ' + address + ' in this page (a seeded sample of each team is shown).';
      return;
    }
    team.value = wanted;
    document.querySelector('input[name=outcome][value=all]').checked = true;
    refresh();
    open(li, false);
    li.scrollIntoView({block: 'nearest'});
  }
  items.forEach(function (li) { li.addEventListener('click', function () { open(li, true); }); });
  team.addEventListener('change', refresh);
  filters.forEach(function (f) { f.addEventListener('change', refresh); });
  window.addEventListener('hashchange', follow);
  refresh();
  follow();
})();
"""


def read_records(path: Path | str) -> dict[str, dict[str, Any]]:
    """A team's ``predictions.jsonl`` as ``{id: row}`` (unreadable lines skipped)."""
    rows, _ = read_trace_rows(path)
    return {str(row["id"]): row for row in rows if "id" in row}


def read_trace_rows(path: Path | str) -> tuple[list[dict[str, Any]], int]:
    """Trace rows of a JSONL file and the number of unreadable lines (skipped, never fatal)."""
    rows, bad = [], 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(row, dict):
                rows.append(row)
            else:
                bad += 1
    return rows, bad


def group_samples(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Rows per ``sample_id`` in the order samples first appear (rows keep their order)."""
    samples: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        samples[str(row.get("sample_id", "?"))].append(row)
    return dict(samples)


def choose_samples(outcomes: Mapping[str, str], *, limit: int | None, seed: int = 0) -> list[str]:
    """All sample ids when there are at most ``limit``; else a seeded sample of ``limit`` of them,
    stratified by outcome (every outcome present keeps at least one), in their original order."""
    ids = list(outcomes)
    if limit is None or len(ids) <= limit:
        return ids
    rng = random.Random(seed)
    by_outcome: dict[str, list[str]] = defaultdict(list)
    for sample_id in ids:
        by_outcome[outcomes[sample_id]].append(sample_id)
    quota = {o: max(1, round(limit * len(group) / len(ids))) for o, group in by_outcome.items()}
    while sum(quota.values()) > limit:  # rounding up can overshoot; trim the largest stratum
        largest = max(quota, key=lambda o: quota[o])
        quota[largest] -= 1
    chosen = {s for o, group in by_outcome.items() for s in rng.sample(group, min(quota[o], len(group)))}
    return [s for s in ids if s in chosen]


def render_browser(
    teams: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    limit: int | None = 200,
    seed: int = 0,
    title: str = "edumas traces",
    notes: Mapping[str, str] | None = None,
    outcomes: Mapping[str, Mapping[str, str]] | None = None,
    records: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> tuple[str, dict[str, dict[str, Any]]]:
    """The page for ``{team: trace rows}`` and per-team stats ``{"samples", "shown", "sampled",
    "outcomes"}``. ``outcomes`` (``{team: {sample_id: outcome}}``) overrides what the rows say
    (:func:`story.sample_outcome`); ``records`` (``{team: {sample_id: predictions row}}``) gives
    each story its gold or label."""
    if not teams:
        raise ValueError("the trace browser needs at least one team's traces")
    stats: dict[str, dict[str, Any]] = {}
    items, articles = [], []
    for t, (team, rows) in enumerate(teams.items()):
        samples = group_samples(rows)
        given = (outcomes or {}).get(team, {})
        found = {s: given[s] if given.get(s) in OUTCOMES else sample_outcome(r) for s, r in samples.items()}
        chosen = choose_samples(found, limit=limit, seed=seed)
        counts = {o: sum(found[s] == o for s in chosen) for o in OUTCOMES}
        sampled = len(chosen) < len(samples)
        stats[team] = {"samples": len(samples), "shown": len(chosen), "sampled": sampled, "outcomes": counts}
        for i, sample_id in enumerate(chosen):
            target = f"s{t}-{i}"
            outcome = found[sample_id]
            steps = len(samples[sample_id])
            record = (records or {}).get(team, {}).get(sample_id)
            items.append(
                f'<li data-team="{esc(team)}" data-sample="{esc(sample_id)}" data-outcome="{outcome}" '
                f'data-target="{target}">{esc(sample_id)}'
                f'<span class="badge {outcome}">{outcome}</span> <span class="meta">{steps} steps</span></li>'
            )
            link = f'<a class="meta" href="#{esc(team)}/{esc(sample_id)}">link to this sample</a>'
            articles.append(
                f'<article id="{target}" hidden><h2>{esc(team)} · {esc(sample_id)} '
                f'<span class="badge {outcome}">{outcome}</span> {link}</h2>'
                f"{story_html(samples[sample_id], record)}</article>"
            )
    summary = "; ".join(
        f"{team}: {s['shown']} of {s['samples']} samples" + (f" (seeded sample, seed {seed})" if s["sampled"] else "")
        for team, s in stats.items()
    )
    extra = " ".join(esc(n) for n in (notes or {}).values())
    options = "".join(f'<option value="{esc(team)}">{esc(team)}</option>' for team in teams)
    radios = "".join(
        f'<label><input type="radio" name="outcome" value="{o}"{" checked" if o == "all" else ""}> {o}</label> '
        for o in ("all", *OUTCOMES)
    )
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{STYLE}</style></head><body><header><b>{esc(title)}</b> · team <select id=\"team\">{options}</select> "
        f'{radios}<span id="shown"></span> <span class="meta">{esc(summary)} {extra}</span></header>'
        f'<div id="layout"><ul id="list">{"".join(items)}</ul><main>'
        f'<p class="meta" id="hint">Choose a sample on the left.</p>{"".join(articles)}</main></div>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
    return page, stats


def write_trace_browser(
    path: Path | str,
    teams: Mapping[str, Path | str | Sequence[Mapping[str, Any]]],
    *,
    limit: int | None = 200,
    seed: int = 0,
    title: str = "edumas traces",
    outcomes: Mapping[str, Mapping[str, str]] | None = None,
    records: Mapping[str, Path | str | Mapping[str, Mapping[str, Any]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Write the page for ``{team: traces JSONL path or rows}``; returns per-team stats (with
    ``bad_lines`` for unreadable JSONL lines, which are skipped). ``outcomes``, ``records``
    (``{team: predictions.jsonl path or {id: row}}``): see :func:`render_browser`."""
    loaded, bad = {}, {}
    for team, source in teams.items():
        if isinstance(source, (str, Path)):
            loaded[team], bad[team] = read_trace_rows(source)
        else:
            loaded[team], bad[team] = list(source), 0
    notes = {t: f"{t}: {n} unreadable trace lines skipped." for t, n in bad.items() if n}
    by_id = {t: read_records(r) if isinstance(r, (str, Path)) else r for t, r in (records or {}).items()}
    page, stats = render_browser(
        loaded, limit=limit, seed=seed, title=title, notes=notes, outcomes=outcomes, records=by_id
    )
    with atomic_open(path) as handle:
        handle.write(page)
    for team in stats:
        stats[team]["bad_lines"] = bad[team]
    return stats

