"""Tables (:class:`report_tables.Table`) rendered as Markdown and as HTML, and the summary pages
around them. The HTML page is self-contained: styles inline, plots embedded as data URIs."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipelines.reporting.tables import Table

BOLD = re.compile(r"\*\*(.+?)\*\*")
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:70rem;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.6rem 0}
th,td{border:1px solid #bbb;padding:.25rem .6rem;text-align:right}
th:first-child,td:first-child{text-align:left}
th[colspan]{text-align:center}
caption{font-weight:600;text-align:left;padding:.3rem 0}
.note{color:#555;font-size:.9rem;margin:.2rem 0 1.4rem}
.stamp{color:#555;font-size:.9rem}
.banner{background:#fff4d6;border:1px solid #e0c060;padding:.5rem .8rem;border-radius:4px}
img{max-width:100%;border:1px solid #ddd;margin:.4rem 0}
"""


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> str:
    """A Markdown table with its title above and its provenance note below.
    Column groups (Markdown has no spans) become a ``Group: columns`` line."""
    lines = [f"### {table.title}", ""]
    if table.groups:
        spans, start = [], 0
        for label, span in table.groups:
            if label:
                spans.append(f"{label}: {', '.join(table.columns[start : start + span])}")
            start += span
        lines += ["Columns by task: " + "; ".join(spans) + ".", ""]
    lines.append("| " + " | ".join(_md_cell(c) for c in table.columns) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(table.columns) - 1)) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    if table.note:
        lines += ["", f"*{table.note}*"]
    return "\n".join(lines) + "\n"


def _html_cell(text: str, tag: str) -> str:
    escaped = BOLD.sub(r"<b>\1</b>", html.escape(str(text)))
    return f"<{tag}>{escaped}</{tag}>"


def table_html(table: Table) -> str:
    """An HTML table (caption = title, grouped header row when given) and its note."""
    head = ""
    if table.groups:
        head += "<tr>" + "".join(f'<th colspan="{span}">{html.escape(label)}</th>' for label, span in table.groups)
        head += "</tr>"
    head += "<tr>" + "".join(_html_cell(c, "th") for c in table.columns) + "</tr>"
    body = "".join("<tr>" + "".join(_html_cell(c, "td") for c in row) + "</tr>" for row in table.rows)
    note = f'<p class="note">{html.escape(table.note)}</p>' if table.note else ""
    return (
        f"<table><caption>{html.escape(table.title)}</caption><thead>{head}</thead><tbody>{body}</tbody></table>{note}"
    )


TRACES_TEXT = "every sample's story: each agent call's prompt, reply and parsed result"


@dataclass(frozen=True)
class SummaryHeader:
    """What stands above the sections: the title, how the summary was made, the trace browser's
    link (relative to the summary), the human rating pack's link and the offline-default banner."""

    title: str
    stamp: str = ""
    traces: str | None = None
    banner: str = ""
    human: str | None = None  # the human rating pack's form.html, relative to the summary
    human_note: str = ""  # what the pack holds and how to import it


def _human_text(header: SummaryHeader) -> str:
    return f" ({header.human_note})" if header.human_note else ""


def summary_markdown(
    sections: Sequence[tuple[str, Sequence[Table]]], plots: Sequence[Path], header: SummaryHeader
) -> str:
    """The whole ``summary.md``: the header, each section's tables, then the plots (relative links)."""
    parts = [f"# {header.title}", ""]
    if header.stamp:
        parts += [header.stamp, ""]
    if header.traces:
        parts += [f"Trace browser: [{header.traces}]({header.traces}) ({TRACES_TEXT}).", ""]
    if header.human:
        parts += [f"Human rating pack: [{header.human}]({header.human}){_human_text(header)}.", ""]
    if header.banner:
        parts += [f"> {header.banner}", ""]
    for heading, tables in sections:
        parts += [f"## {heading}", ""] + [table_markdown(t) for t in tables]
    if plots:
        parts += ["## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    return "\n".join(parts)


def summary_html(sections: Sequence[tuple[str, Sequence[Table]]], plots: Sequence[Path], header: SummaryHeader) -> str:
    """The whole self-contained ``summary.html`` (plots embedded as base64 PNG data URIs; the links
    are to the trace browser beside it and, when evaluate wrote one, the human rating pack's form)."""
    e = html.escape
    parts = [
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(header.title)}</title>',
        f"<style>{STYLE}</style></head><body><h1>{e(header.title)}</h1>",
    ]
    if header.stamp:
        parts.append(f'<p class="stamp">{e(header.stamp)}</p>')
    if header.traces:
        link = e(header.traces)
        parts.append(f'<p class="traces">Trace browser: <a href="{link}">{link}</a> ({e(TRACES_TEXT)}).</p>')
    if header.human:
        link = e(header.human)
        parts.append(f'<p class="human">Human rating pack: <a href="{link}">{link}</a>{e(_human_text(header))}.</p>')
    if header.banner:
        parts.append(f'<p class="banner">{e(header.banner)}</p>')
    for heading, tables in sections:
        parts.append(f"<h2>{e(heading)}</h2>" + "".join(table_html(t) for t in tables))
    if plots:
        parts.append("<h2>Plots</h2>")
        for plot in plots:
            data = base64.b64encode(plot.read_bytes()).decode("ascii")
            parts.append(f'<figure><img alt="{e(plot.stem)}" src="data:image/png;base64,{data}"></figure>')
    parts.append("</body></html>\n")
    return "".join(parts)
