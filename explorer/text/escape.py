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


# Markdown written by a person (a lesson's captions, questions, titles): its formatting is kept, but nothing in it can
# act. A link whose target names a scheme other than http(s) (javascript:, data:, vbscript:, file:, …, also written
# with entities or spaces) is kept as its text; an in-app link (no scheme: "/lstm-gates?…", "?step=2", "#top") stays.
# An invisible format character (bidirectional controls such as U+202E, zero-width spaces, soft hyphens: Unicode's
# "Cf", but the emoji joiner U+200D) is shown as a visible mark, ⟨U+202E⟩, so that "exe.live" reads as written.
_INLINE_LINK = re.compile(r"!?\[((?:[^\[\]\\]|\\.)*)\]\(\s*(<[^>\n]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)"
                          r"((?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*)\)")
_DEFINITION = re.compile(r"(?m)^([ ]{0,3}\[[^\]\n]+\]:[ \t]*)(<[^>\n]*>|\S+)")
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^<>\s]*)>")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_KEPT_FORMAT = {"\u200d"}  # ZERO WIDTH JOINER: inside emoji sequences (👩‍💻), shown by every font as intended


def _safe_target(target: str) -> bool:
    """Whether a link target is http(s) or in the app (no scheme), read as a browser would: entities decoded,
    spaces and control characters dropped."""
    plain = re.sub(r"[\x00-\x20\x7f]+", "", html.unescape(target.strip("<>")))
    scheme = _SCHEME.match(plain)
    return scheme is None or scheme.group(1).lower() in ("http", "https")


def visible_format_characters(text: str) -> str:
    """`text` with each invisible format character (Unicode category Cf but U+200D) shown as ⟨U+XXXX⟩."""
    import unicodedata

    return "".join(f"⟨U+{ord(ch):04X}⟩" if unicodedata.category(ch) == "Cf" and ch not in _KEPT_FORMAT else ch
                   for ch in text)


def inert_markdown(text: str) -> str:
    """Markdown from a person (a lesson), kept as written but for what could act or mislead: links to schemes other
    than http(s) become their text, invisible format characters visible marks (`visible_format_characters`)."""
    def inline(m: re.Match[str]) -> str:
        return m.group(0) if _safe_target(m.group(2)) else m.group(1)

    def definition(m: re.Match[str]) -> str:
        return m.group(0) if _safe_target(m.group(2)) else m.group(1) + "#"

    def autolink(m: re.Match[str]) -> str:
        return m.group(0) if _safe_target(m.group(1)) else "\\<" + m.group(1).replace(":", "\\:", 1) + "\\>"

    out = _AUTOLINK.sub(autolink, _DEFINITION.sub(definition, _INLINE_LINK.sub(inline, text)))
    return visible_format_characters(out)
