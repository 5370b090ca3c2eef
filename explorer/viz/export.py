"""A view, or a whole lesson, as one self-contained HTML file: the interactive charts (plotly.js embedded once, no
network), the sentence, the badges and captions, what to notice and the question of each step. It opens in any
browser without the server; printed (chromium), each section is a page: a lesson's slides."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Sequence

import plotly.graph_objects as go

from explorer.text.escape import md_unescape

BADGE_COLOURS = {"blue": "#1c64f2", "green": "#0e9f6e", "orange": "#d97706", "violet": "#7e3af2", "gray": "#6b7280",
                 "red": "#e02424"}


@dataclass
class Section:
    """One view as it was shown: title and summary; `items` in page order, each ("figure", go.Figure | dict,
    badge Markdown) or ("text", Markdown) or ("notice", [Markdown points]); `inputs`: the URL parameters it was
    opened with (model, sentence, settings); `question`: a lesson step's question."""

    title: str
    summary: str = ""
    items: list[tuple] = field(default_factory=list)
    inputs: dict[str, str] = field(default_factory=dict)
    heading: str = ""  # e.g. "Step 2 of 8"
    question: str = ""
    notice: str = ""  # a lesson step's "what to notice", shown with its question under the main chart


def markdown_html(text: str) -> str:
    """The Markdown of a caption as HTML: escapes undone then HTML-escaped, **bold**, *italic*, `code`, Streamlit's
    :colour-badge[label] and :colour[text]; nothing else is interpreted."""
    out = html.escape(md_unescape(text), quote=False)
    out = re.sub(r":(\w+)-badge\[([^\]]*)\]", lambda m: f'<span class="badge" style="background:'
                 f'{BADGE_COLOURS.get(m.group(1), "#6b7280")}">{m.group(2)}</span>', out)
    out = re.sub(r":(\w+)\[([^\]]*)\]", lambda m: f'<span style="color:{BADGE_COLOURS.get(m.group(1), "inherit")}">'
                 f'{m.group(2)}</span>' if m.group(1) in BADGE_COLOURS else m.group(0), out)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def _figure_html(fig: go.Figure | Mapping[str, object], div: str) -> str:
    figure = fig if isinstance(fig, go.Figure) else go.Figure(fig)
    return figure.to_html(full_html=False, include_plotlyjs=False, div_id=div,
                          config={"displaylogo": False, "responsive": True})


STYLE = """
body { font-family: "Source Sans Pro", "Helvetica Neue", Arial, sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #262730; padding: 0 1rem; }
h1 { font-size: 2rem; margin-bottom: .2rem; } h2 { margin-top: 0; }
.summary, .caption { color: #6b7280; font-size: .95rem; }
.inputs { background: #f0f2f6; border-radius: .5rem; padding: .6rem 1rem; font-size: .95rem; }
.inputs dt { font-weight: 600; display: inline; } .inputs dd { display: inline; margin: 0 1rem 0 .3rem; }
.badge { color: white; border-radius: .3rem; padding: 0 .35rem; font-size: .8rem; margin-right: .3rem; }
.question { border-left: 4px solid #ff4b4b; padding: .4rem 1rem; background: #fff5f5; font-size: 1.1rem; }
section { page-break-after: always; break-after: page; margin-bottom: 3rem; }
section:last-of-type { page-break-after: auto; break-after: auto; }
.step { color: #ff4b4b; font-weight: 600; }
table.table { border-collapse: collapse; font-size: .9rem; margin: .5rem 0 1rem; }
table.table td, table.table th { border-bottom: 1px solid #e5e7eb; padding: .2rem .6rem; text-align: left; }
.notice { font-size: 1.05rem; }
@media print { body { margin: 0; max-width: none; } .summary, footer, .more p.caption, .more h3, .more ul,
               .more table { display: none; } }
footer { color: #6b7280; font-size: .85rem; border-top: 1px solid #e5e7eb; padding-top: .5rem; }
"""


def _item_html(item: tuple, div: str) -> str:
    kind = item[0]
    if kind == "figure":
        badge = f'<p class="caption">{markdown_html(item[2])}</p>' if item[2] else ""
        return badge + _figure_html(item[1], div)
    if kind == "text":
        return f'<p class="caption">{markdown_html(item[1])}</p>'
    if kind == "html":  # HTML built by the caller from escaped values (a table)
        return str(item[1])
    if kind == "notice":
        return "<h3>What to notice</h3><ul>" + "".join(f"<li>{markdown_html(p)}</li>" for p in item[1]) + "</ul>"
    return ""


def section_html(s: Section, index: int) -> str:
    """A section: its heading, title and settings, the items up to its first chart, the lesson step's notice and
    question, then the rest (class "more": left out of a printed slide)."""
    parts = ["<section>"]
    if s.heading:
        parts.append(f'<div class="step">{html.escape(s.heading)}</div>')
    parts.append(f"<h1>{html.escape(s.title)}</h1>")
    if s.summary:
        parts.append(f'<p class="summary">{markdown_html(s.summary)}</p>')
    if s.inputs:
        parts.append('<dl class="inputs">' + "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>"
                                                     for k, v in s.inputs.items()) + "</dl>")
    lesson = ""
    if s.notice:
        lesson += f'<p class="notice"><b>What to notice.</b> {markdown_html(s.notice)}</p>'
    if s.question:
        lesson += f'<p class="question"><b>Question.</b> {markdown_html(s.question)}</p>'
    first: list[str] = []
    more: list[str] = []
    n = 0
    for item in s.items:
        (more if n and any(i[0] == "figure" for i in s.items) else first).append(_item_html(item, f"s{index}-f{n}"))
        n += item[0] == "figure"
    parts += first + [lesson] + ['<div class="more">', *more, "</div>", "</section>"]
    return "\n".join(parts)


# printed, each section is scaled to fit one page (a slide): A4 landscape less the default margins, in CSS pixels
FIT_SCRIPT = """
function fitSlides(pageHeight) {
  document.querySelectorAll('section').forEach(s => { s.style.zoom = 1;
    s.style.zoom = Math.min(1, pageHeight / s.scrollHeight).toFixed(3); });
}
window.addEventListener('beforeprint', () => fitSlides(700));
window.addEventListener('afterprint', () => document.querySelectorAll('section').forEach(s => { s.style.zoom = ''; }));
"""


def standalone_html(title: str, sections: Sequence[Section], footer: str = "") -> str:
    """One HTML document: `sections` in order, plotly.js embedded once (about 4.6 MB), nothing fetched."""
    from plotly.offline import get_plotlyjs

    body = "\n".join(section_html(s, i) for i, s in enumerate(sections))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style>"
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script>"
            f"<script type=\"text/javascript\">{FIT_SCRIPT}</script></head><body>\n{body}\n"
            + (f"<footer>{markdown_html(footer)}</footer>" if footer else "") + "</body></html>\n")
