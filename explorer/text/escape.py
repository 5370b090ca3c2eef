"""Strings from a URL, a file or a model shown as text: escaped for Markdown, inline code, HTML, Plotly and LaTeX.

Streamlit renders Markdown in st.markdown, st.caption, alerts, toasts, titles, widget labels and help, radio
options, progress text, expander and tab titles. `md(value)` makes a value read there as the characters it holds:

- every character CommonMark, GFM and Streamlit give a meaning (links, images, emphasis, code, raw HTML, tables,
  strikethrough, `$` math, `:red[...]` directives) is backslash-escaped;
- a `#`, `+`, `-`, `=` or `1.` at the start of a line (headings, lists, setext underlines) is escaped too;
- what Streamlit's frontend rewrites in the text after parsing, where a backslash no longer counts (links made of
  bare `https://…`, `www.…` and `a@b.c`, `:material/…:` icons, `:emoji:` shortcodes), is broken by an invisible
  WORD JOINER (U+2060) after the `:`, `@` or `www`.

`md_message(text)` is a plain-text message (an exception, a probe's note) that may quote values: all of it escaped
but its own `code` spans, which Markdown shows literally. `md_code(value)` is an inline code span whatever backticks
the value holds; `html_text(value)` escapes for HTML (st.html, unsafe_allow_html, tooltips), `plotly_text(value)`
for Plotly's titles, labels and hover text (Plotly reads `<a href>`, `<b>`, `<br>` … there), `latex_text(value)`
for `\\text{…}` in st.latex. `md_unescape` gives back what a reader sees (for tests).
"""
from __future__ import annotations

import html
import re

JOINER = "\u2060"  # WORD JOINER: zero width, no break
_ALWAYS = "\\`*_{}[]()<>!|~$&:"  # characters with a meaning anywhere in a line
_LINE_START = re.compile(r"(?m)^([ \t]*)([#+=-]|\d+[.)])")
# what Streamlit rewrites in text nodes: bare URLs, www., e-mail addresses, :material/name:, :streamlit:, :emoji:
_REWRITTEN = re.compile(r"(?i)(?:(?<=http:)|(?<=https:))(?=//)|(?<=www)(?=\.)|(?<=@)(?=[-\w])"
                        r"|(?<=:)(?=[\w+-][\w/+-]*:)")
_ESCAPES = str.maketrans({c: "\\" + c for c in _ALWAYS})


def md(value: object) -> str:
    """`value` (any object: str() is taken) as Markdown that shows exactly its characters."""
    text = _REWRITTEN.sub(JOINER, str(value)).translate(_ESCAPES)
    return _LINE_START.sub(lambda m: m.group(1) + (m.group(2)[:-1] + "\\" + m.group(2)[-1]), text)


def md_unescape(markdown: str) -> str:
    """What a reader sees of Markdown that `md` or `md_message` made (backslash escapes and joiners removed), for
    tests that look for a message's words."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(markdown)).replace(JOINER, "")


def md_message(text: object) -> str:
    """A plain-text message as Markdown: escaped as `md` does, except its `code` spans (a run of backticks up to the
    next run of the same length, as CommonMark pairs them), which are kept: Markdown shows their text literally."""
    text, out, start = str(text), [], 0
    runs = list(re.finditer(r"`+", text))
    i = 0
    while i < len(runs):
        close = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == len(runs[i].group())), None)
        if close is None:
            i += 1
            continue
        out += [md(text[start:runs[i].start()]), text[runs[i].start():runs[close].end()]]
        start, i = runs[close].end(), close + 1
    return "".join(out) + md(text[start:])


def md_code(value: object) -> str:
    """`value` as an inline code span (shown literally, in a monospace font): fenced with more backticks than it
    holds in a row, padded with spaces where it starts or ends with a backtick; newlines become spaces."""
    text = " ".join(str(value).splitlines()) or " "
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def html_text(value: object) -> str:
    """`value` escaped for HTML text and attribute values (& < > " ')."""
    return html.escape(str(value), quote=True)


_LATEX = str.maketrans({"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "#": r"\#", "$": r"\$", "%": r"\%",
                        "&": r"\&", "_": r"\_", "^": r"\^{}", "~": r"\~{}"})


def latex_text(value: object) -> str:
    """`value` inside `\\text{…}` of st.latex (KaTeX): LaTeX's special characters escaped, newlines as spaces."""
    return " ".join(str(value).splitlines()).translate(_LATEX)


def plotly_text(value: object) -> str:
    """`value` as Plotly shows it literally in a title, axis label, tick, legend or hover text (& < > escaped)."""
    return html.escape(str(value), quote=False)


def md_line(text: object) -> str:
    """Text (a note naming user words or weight keys) shown literally by st.markdown / st.warning, on one line."""
    return md(" ".join(str(text).split()))
