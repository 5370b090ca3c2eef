"""The live sentence box: a text box that wraps (the whole sentence stays in view, also at projector sizes) and
sends its text on a typing pause or on Enter.

A Streamlit v2 component (our own static HTML, CSS and JS; nothing from the user reaches them: the label, help,
placeholder and text are set as text by the JS, never as HTML). Its state lives under `_box_<key>` as
{"value": text}; its change callback copies the value to st.session_state[key], as st.text_input would.

- mode "pause": the text is sent `debounce` ms after the last key, and at once on Enter or when the box loses focus;
- mode "enter": only on Enter or when the box loses focus (a view that computes for seconds: no half-typed run).
Enter sends the text and adds no line break; Shift+Enter adds one (the app then shows a text area, see
widgets.sentence_input). To put a new text in the box from Python, drop its state (`forget(key)`).
"""
from __future__ import annotations

from typing import Literal

import streamlit as st

HTML = """
<div class="sentence-box">
  <label class="sentence-box__label"><span class="sentence-box__text"></span><span class="sentence-box__help"
    aria-hidden="true">?</span></label>
  <textarea class="sentence-box__input" rows="1" spellcheck="false" autocomplete="off"></textarea>
</div>
"""

CSS = """
.sentence-box { display: flex; flex-direction: column; width: 100%; font-family: var(--st-font, sans-serif);
  color: var(--st-text-color, inherit); }
.sentence-box__label { font-size: 0.875rem; line-height: 1.6; margin-bottom: 0.25rem; min-height: 1.4em;
  display: flex; gap: 0.4em; align-items: center; }
.sentence-box__help { display: none; border: 1px solid currentColor; border-radius: 50%; width: 1.1em;
  height: 1.1em; font-size: 0.75em; line-height: 1.05em; text-align: center; opacity: 0.6; cursor: help; }
.sentence-box--help .sentence-box__help { display: inline-block; }
.sentence-box__input { box-sizing: border-box; width: 100%; resize: none; overflow: hidden; margin: 0;
  padding: 0.5rem 0.75rem; font-family: inherit; font-size: 1rem; line-height: 1.5; white-space: pre-wrap;
  overflow-wrap: anywhere; color: var(--st-text-color, inherit); caret-color: var(--st-text-color, inherit);
  background-color: var(--st-secondary-background-color, #f0f2f6); border: 1px solid rgba(127, 127, 127, 0.3);
  border-radius: 0.5rem; outline: none; transition: border-color 150ms ease; }
.sentence-box__input:focus { border-color: var(--st-primary-color, #ff4b4b); }
"""

JS = r"""
export default function({ parentElement, data, setStateValue }) {
  const root = parentElement.querySelector(".sentence-box");
  const box = parentElement.querySelector(".sentence-box__input");
  const label = parentElement.querySelector(".sentence-box__label");
  parentElement.querySelector(".sentence-box__text").textContent = data.label ?? "";
  label.title = data.help ?? "";
  root.classList.toggle("sentence-box--help", !!data.help);
  box.setAttribute("aria-label", data.label ?? "");
  box.placeholder = data.placeholder ?? "";
  box.maxLength = data.max_chars > 0 ? data.max_chars : 524288;
  parentElement._mode = data.mode;
  parentElement._debounce = data.debounce ?? 0;

  // as tall as its wrapped text: the whole sentence stays in view
  const fit = () => { box.style.height = "auto"; box.style.height = box.scrollHeight + 2 + "px"; };

  // the value Python shows: equal to the box once Python has read what was sent (the typing guard ends);
  // different while nothing is being typed: Python set it (a first render, or a new sentence), so adopt it. Python
  // seeded the state with it already (`default`): no rerun to report it back, which would carry the other widgets'
  // values of the run before (a lesson's previous step)
  const py = data.value ?? "";
  if (py === box.value) {
    box._typing = false;
  } else if (!box._typing) {
    box.value = py;
  }
  fit();

  if (!parentElement._attached) {
    let timer = null;
    const send = () => { clearTimeout(timer); setStateValue("value", box.value); };
    box.addEventListener("input", () => {
      box._typing = true;
      fit();
      clearTimeout(timer);
      if (parentElement._mode === "pause") timer = setTimeout(send, parentElement._debounce);
    });
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        send();
      }
    });
    box.addEventListener("blur", () => { if (box._typing) send(); });
    let width = 0;
    new ResizeObserver(() => {
      if (box.clientWidth !== width) { width = box.clientWidth; fit(); }
    }).observe(box);
    parentElement._attached = true;
  }
}
"""

_BOX = st.components.v2.component("explorer_sentence_box", html=HTML, css=CSS, js=JS, isolate_styles=False)


def state_key(key: str) -> str:
    """Where the box with widget key `key` keeps its component state."""
    return f"_box_{key}"


def forget(key: str) -> None:
    """Drop the box's state: its next render shows st.session_state[key] (or its `value`)."""
    st.session_state.pop(state_key(key), None)


def sentence_box(label: str, value: str, key: str, max_chars: int, mode: Literal["pause", "enter"] = "pause",
                 debounce: int = 350, placeholder: str = "", help: str | None = None) -> str:
    """Mount the box; returns its current text (what was last sent, else `value`)."""
    internal = state_key(key)
    held = st.session_state.get(internal)
    current = held.get("value", value) if isinstance(held, dict) else value

    def copy_out() -> None:  # before the script reruns, as st.text_input's own key would hold it
        now = st.session_state.get(internal)
        if isinstance(now, dict) and "value" in now:
            st.session_state[key] = now["value"]

    result = _BOX(key=internal, data={"label": label, "value": current, "mode": mode, "debounce": debounce,
                                      "max_chars": max_chars, "placeholder": placeholder, "help": help or ""},
                  default={"value": current}, on_value_change=copy_out)
    sent = getattr(result, "value", None)
    return sent if isinstance(sent, str) else current


def forget_sentence_input() -> None:
    """Drop the sentence input's memory (the live input's last text, the preset choice, the text carried between
    views), so that the next view seeds it from `text` in the session or the URL."""
    st.session_state.pop("_text", None)
    forget("text")
    st.session_state["_text_rev"] = st.session_state.get("_text_rev", 0) + 1
