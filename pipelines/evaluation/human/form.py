"""One self-contained HTML rating form (no server, no network): a rater picks their name, reads
the criteria, chooses ``A`` / ``equal`` / ``B`` per row and saves the answers as a CSV download
(a Blob link), which :func:`pipelines.evaluation.human.sheets.read_ratings` imports.

The form holds the same blind rows as the CSV sheets (:func:`human_sheets.write_sheets` returns
them); everything is rendered here, escaped, so the page needs no data loading. The saved CSV has
the columns ``rater, row, item_key, dimension, choice, comment``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.evaluation.hts.agents.pairwise_judge import load_criteria
from pipelines.evaluation.hts.judging import DIMENSIONS
from pipelines.evaluation.human.sheets import rater_slug, write_sheets
from pipelines.io import atomic_open

FORM_COLUMNS = ("rater", "row", "item_key", "dimension", "choice", "comment")
TEXT = {
    "en": {
        "who": "Your name",
        "intro": "For every row, read the discussion topic, the student's answer and the two replies, then choose "
        "which reply is better on the dimension named in the row, using the criteria below (each describes a "
        "fault). The order of the replies is random. Save your answers as a CSV file when you are done (you "
        "can save several times; the last file counts) and send it back. Answers are also kept in this "
        "browser tab if the page is reloaded.",
        "criteria": "Criteria",
        "topic": "Discussion topic",
        "student": "Student",
        "answer": "Student's answer",
        "dimension": "Dimension",
        "a": "A is better",
        "equal": "Equal",
        "b": "B is better",
        "comment": "Comment (optional)",
        "save": "Save answers (CSV)",
        "answered": "answered",
        "tie": "The two replies are the same text: marked Equal, nothing to rate.",
        "passage": "Book passage (check the replies against it for factual errors)",
    },
    "zh": {
        "who": "你的名字",
        "intro": "请逐行阅读讨论话题、学生的回答和两条回复，按该行所写的维度并参照下面的标准"
        "（每条描述一种缺陷）选出更好的回复。"
        "两条回复的顺序是随机的。完成后把答案保存为 CSV 文件并发回（可以多次保存，以最后一个文件为准）。"
        "重新加载页面时，答案也会保留在本浏览器标签页中。",
        "criteria": "评价标准",
        "topic": "讨论话题",
        "student": "学生",
        "answer": "学生的回答",
        "dimension": "维度",
        "a": "A 更好",
        "equal": "相同",
        "b": "B 更好",
        "comment": "备注（可选）",
        "save": "保存答案（CSV）",
        "answered": "已作答",
        "tie": "两条回复文字相同：已标为相同，无需评分。",
        "passage": "原文段落（据此检查回复是否有事实错误）",
    },
}

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:72rem;padding:0 1rem;color:#222}
.item{border:1px solid #ccc;border-radius:6px;padding:.8rem;margin:1rem 0}
.replies{display:grid;grid-template-columns:1fr 1fr;gap:1rem}
.reply{background:#f6f6f6;padding:.6rem;border-radius:4px;white-space:pre-wrap}
.dim{font-weight:600;color:#034}
.choices label{margin-right:1.2rem}
textarea{width:100%;min-height:2.2rem}
#bar{position:sticky;top:0;background:#fff;padding:.5rem 0;border-bottom:1px solid #ddd}
details{margin:.8rem 0}
.tie{color:#555;font-style:italic}
"""

SCRIPT = """
(function () {
  const columns = %(columns)s;
  const select = document.getElementById('rater');
  const status = document.getElementById('status');
  const link = document.getElementById('download');
  function current() { return document.querySelector('section[data-rater="' + CSS.escape(select.value) + '"]'); }
  function count() {
    const section = current();
    const items = section.querySelectorAll('.item');
    const done = section.querySelectorAll('input[type=radio]:checked').length;
    status.textContent = done + ' / ' + items.length + ' %(answered)s';
  }
  function show() {
    document.querySelectorAll('section[data-rater]').forEach(function (s) {
      s.hidden = s.dataset.rater !== select.value;
    });
    count();
  }
  // Answers survive a reload of the page: kept in the tab's window.name (defined for pages opened from
  // disk, where localStorage is not: Chromium can hand a reloaded file:// page an empty storage) and in
  // localStorage (which also survives closing the tab where the browser shares it between file pages).
  const TAB = 'edumas-rating:';
  function storeKey(section) { return 'edumas-rating:' + document.title + ':' + section.dataset.rater; }
  function tabAnswers() {
    if (window.name.indexOf(TAB) !== 0) { return {}; }
    try { return JSON.parse(window.name.slice(TAB.length)) || {}; } catch (e) { return {}; }
  }
  function store(section) {
    const answers = {};
    section.querySelectorAll('.item').forEach(function (item) {
      const checked = item.querySelector('input[type=radio]:checked');
      answers[item.dataset.row] = [checked ? checked.value : '', item.querySelector('textarea').value];
    });
    const tab = tabAnswers();
    tab[storeKey(section)] = answers;
    window.name = TAB + JSON.stringify(tab);
    try { localStorage.setItem(storeKey(section), JSON.stringify(answers)); } catch (e) { /* storage off */ }
  }
  function restore(section) {
    let answers = tabAnswers()[storeKey(section)] || null;
    if (!answers) {
      try { answers = JSON.parse(localStorage.getItem(storeKey(section)) || 'null'); } catch (e) { answers = null; }
    }
    if (!answers) { return; }
    section.querySelectorAll('.item').forEach(function (item) {
      const saved = answers[item.dataset.row];
      if (!saved) { return; }
      const radio = item.querySelector('input[type=radio][value="' + saved[0] + '"]');
      if (radio) { radio.checked = true; }
      item.querySelector('textarea').value = saved[1];
    });
  }
  function field(value) { return '"' + String(value == null ? '' : value).replace(/"/g, '""') + '"'; }
  function save() {
    const section = current();
    const lines = [columns.join(',')];
    section.querySelectorAll('.item').forEach(function (item) {
      const checked = item.querySelector('input[type=radio]:checked');
      const values = [section.dataset.rater, item.dataset.row, item.dataset.key, item.dataset.dimension,
                      checked ? checked.value : '', item.querySelector('textarea').value];
      lines.push(values.map(field).join(','));
    });
    const blob = new Blob(['\\ufeff' + lines.join('\\r\\n') + '\\r\\n'], {type: 'text/csv;charset=utf-8'});
    if (link.href) { URL.revokeObjectURL(link.href); }
    link.href = URL.createObjectURL(blob);
    link.download = 'ratings_' + section.dataset.slug + '.csv';
    link.click();
    link.dataset.saved = String(Number(link.dataset.saved || 0) + 1);
  }
  select.addEventListener('change', show);
  document.addEventListener('change', function (event) {
    const section = event.target.closest('section[data-rater]');
    if (section) { store(section); count(); }
  });
  document.addEventListener('input', function (event) {
    const section = event.target.closest('section[data-rater]');
    if (section) { store(section); }
  });
  document.querySelectorAll('section[data-rater]').forEach(restore);
  document.getElementById('save').addEventListener('click', save);
  show();
})();
"""


def _criteria_html(language: str, dimensions: Sequence[str]) -> str:
    criteria = load_criteria(language)
    parts = []
    for dimension in dimensions:
        entry = criteria[dimension]
        items = "".join(f"<li>{html.escape(c['code'])} {html.escape(c['text'])}</li>" for c in entry["criteria"])
        parts.append(f"<h3>{html.escape(entry['heading'])}</h3><ul>{items}</ul>")
    return "".join(parts)


def _row_html(row: Mapping[str, Any], text: Mapping[str, str], labels: Mapping[str, str], name: str) -> str:
    e = html.escape
    tie = bool(row.get("tie"))
    radios = "".join(
        f'<label><input type="radio" name="{e(name)}" value="{value}"{" checked" if tie and value == "equal" else ""}>'
        f" {e(text[label])}</label>"
        for value, label in (("A", "a"), ("equal", "equal"), ("B", "b"))
    )
    tie_note = f'<p class="tie">{e(text["tie"])}</p>' if tie else ""
    passage = ""
    if row.get("passage"):  # the dimensions whose criteria need it (factual errors)
        passage = f'<details class="passage" open><summary>{e(text["passage"])}</summary>'
        passage += f'<div class="reply">{e(row["passage"])}</div></details>'
    return (
        f'<div class="item{" tie" if tie else ""}" data-row="{e(str(row["row"]))}" data-key="{e(row["item_key"])}" '
        f'data-dimension="{e(row["dimension"])}">'
        f'<p>#{e(str(row["row"]))} · {e(text["dimension"])}: <span class="dim">{e(labels[row["dimension"]])}</span></p>'
        f"<p><b>{e(text['topic'])}:</b> {e(row['topic'])}</p>"
        + (f"<p><b>{e(text['student'])}:</b> {e(row['student'])}</p>" if row.get("student") else "")
        + f"<p><b>{e(text['answer'])}:</b> {e(row['student_answer'])}</p>"
        + passage
        + f'<div class="replies"><div><b>A</b><div class="reply">{e(row["reply_a"])}</div></div>'
        f'<div><b>B</b><div class="reply">{e(row["reply_b"])}</div></div></div>{tie_note}'
        f'<p class="choices">{radios}</p>'
        f'<textarea placeholder="{e(text["comment"])}"></textarea></div>'
    )


def render_form(
    sheets: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    title: str = "Tutoring replies: pairwise rating",
    language: str = "en",
) -> str:
    """The whole HTML page for the raters' sheets (``{rater: rows}`` as :func:`write_sheets` returns)."""
    if language not in TEXT:
        raise ValueError(f"form language {language!r} not available; choose one of {sorted(TEXT)}")
    if not sheets:
        raise ValueError("the form needs at least one rater's sheet")
    text, e = TEXT[language], html.escape
    criteria = load_criteria(language)
    labels = {d: criteria[d]["label"] for d in criteria}
    dimensions = list(dict.fromkeys(row["dimension"] for rows in sheets.values() for row in rows))
    options = "".join(f'<option value="{e(r)}">{e(r)}</option>' for r in sheets)
    sections = []
    for rater, rows in sheets.items():
        slug = rater_slug(rater)
        body = "".join(_row_html(row, text, labels, f"{slug}-{row['row']}") for row in rows)
        sections.append(f'<section data-rater="{e(rater)}" data-slug="{e(slug)}" hidden>{body}</section>')
    script = SCRIPT % {"columns": json.dumps(list(FORM_COLUMNS)), "answered": text["answered"]}
    return (
        f'<!DOCTYPE html><html lang="{e(language)}"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{e(title)}</title>'
        f"<style>{STYLE}</style></head><body><h1>{e(title)}</h1><p>{e(text['intro'])}</p>"
        f"<details open><summary>{e(text['criteria'])}</summary>{_criteria_html(language, dimensions)}</details>"
        f'<div id="bar"><label>{e(text["who"])}: <select id="rater">{options}</select></label> '
        f'<button id="save" type="button">{e(text["save"])}</button> <span id="status"></span>'
        f'<a id="download" hidden></a></div>'
        f"{''.join(sections)}<script>{script}</script></body></html>\n"
    )


def write_form(path: Path | str, sheets: Mapping[str, Sequence[Mapping[str, Any]]], **options: Any) -> None:
    """Write :func:`render_form` atomically (``options``: title, language)."""
    with atomic_open(path) as handle:
        handle.write(render_form(sheets, **options))


def write_rating_pack(
    folder: Path | str,
    items: Sequence[Any],
    raters: Sequence[str],
    *,
    dimensions: Sequence[str] | None = None,
    seed: int = 0,
    sample: int | None = None,
    language: str = "en",
    title: str = "Tutoring replies: pairwise rating",
    passages: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Everything the raters need, in ``folder``: ``sheet_<rater>.csv`` each, ``form.html`` (all
    raters' sheets; each picks their name) and ``key.csv`` (keep it from the raters). ``items``: a
    list (one comparison) or ``{comparison: items}``; ``passages``: ``{item id: book passage}``.
    Returns ``{"sheets": [paths], "form": path, "key": path}``."""
    folder = Path(folder)
    sheets = write_sheets(
        folder, items, raters, dimensions=dimensions or DIMENSIONS, seed=seed, sample=sample, passages=passages
    )
    write_form(folder / "form.html", sheets, title=title, language=language)
    return {
        "sheets": [folder / f"sheet_{rater_slug(r)}.csv" for r in raters],
        "form": folder / "form.html",
        "key": folder / "key.csv",
    }
