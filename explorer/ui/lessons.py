"""Lessons in the app: the lesson bar above a view opened by a lesson step, the "save this view as a step" tool in
the sidebar, and the Lessons page (list, upload, draft lesson, file format).

A step opens its view with st.switch_page and the step's query parameters plus ?lesson=<id>&lesson_step=<n>;
app.py calls frame() on every run, which shows the bar whenever those two parameters are in the URL.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import math
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer import lessons as L
from explorer.text.escape import md, md_message
from explorer.ui import export, settings, state
from explorer.ui.sentence_box import forget_sentence_input
from explorer.ui.widgets import page_header
from explorer.views import HOME, PARAMS

LESSONS_PATH = "lesson-plans"  # url_path of the Lessons page (explorer/views.py)
GOTO = "_lesson_goto"  # (script, query params) to switch to at the start of the next run
UPLOADS = "_lessons_uploaded"  # lesson id -> Lesson, this browser session only
UPLOAD_OUTCOMES = "_lessons_upload_outcomes"
DRAFT = "_lesson_draft"  # L.Draft, this browser session only
DRAFT_ID = "draft"
MAX_UPLOAD_MB = 1  # Streamlit's own limit for the uploader; parse_bytes refuses more than L.max_lesson_bytes()
SCROLL_TOP = "_lesson_scroll_top"  # set by a lesson button: the next page opens at its top
PANEL_SPLIT = (3, 1)  # widths of the view and of the lesson panel beside it
_SCROLLS = itertools.count()  # makes each scroll script new, so that the browser runs it
# a static script; the one value put in it is that counter (tests/test_security_defaults.py)
SCROLL_SCRIPT = ("<script>/* {} */ for (const el of [window.parent.document.querySelector('[data-testid=\"stMain\"]'), "
                 "window.parent.document.scrollingElement]) {{ if (el) el.scrollTop = 0; }}</script>")
def notes_height(title: str, question: str, projector: bool) -> int:
    """Px of "What to notice" before it scrolls: in projector mode what the panel's other lines leave of a 1280×800
    screen (the progress title and the question, ~24 characters a line of 31 px in the 284 px panel; measured by
    tests/test_browser.py on every step: the estimate errs by up to a line, so it keeps one spare), between 170 and
    290; 300 in normal mode."""
    if not projector:
        return 300
    lines = math.ceil(len(title) / 24) + math.ceil((len(question) + 24) / 24)
    return max(170, min(290, 600 - 31 * lines))
# → / PageDown / Space: Next, ← / PageUp: Previous (a presenter's clicker sends PageDown/PageUp); not while typing in a
# box or choosing in a list. Installed once per browser page: a lesson step's run draws it again, the guard keeps one.
KEYS_SCRIPT = """<script>(() => {
  const doc = window.parent.document;
  if (doc.__explorerLessonKeys) return;
  doc.__explorerLessonKeys = true;
  const keys = {ArrowRight: "_lesson_next", PageDown: "_lesson_next", " ": "_lesson_next",
                ArrowLeft: "_lesson_prev", PageUp: "_lesson_prev"};
  doc.addEventListener("keydown", (e) => {
    const el = e.target, tag = (el && el.tagName || "").toLowerCase();
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || ["input", "textarea", "select", "button"].includes(tag)
        || (el && (el.isContentEditable || el.closest("[role=listbox], [role=slider], [data-baseweb=select]")))) return;
    const key = keys[e.key] || (keys[e.key] === undefined && e.key === "Spacebar" ? "_lesson_next" : null);
    const button = key && (doc.querySelector(`.st-key-${key} button`) ||
                           (key === "_lesson_next" ? doc.querySelector(".st-key-_lesson_finish button") : null));
    if (button && !button.disabled) { e.preventDefault(); button.click(); }
  });
})();</script>"""


# ------------------------------------------------------------------------------------------------ lessons
@st.cache_resource(max_entries=4, show_spinner=False)
def _shipped(signature: tuple) -> tuple[list[L.Lesson], list[L.LessonError]]:
    return L.load_dir(L.LESSON_DIR)


def shipped() -> tuple[list[L.Lesson], list[L.LessonError]]:
    """The lessons in assets/lessons and the errors of the files that cannot be used (re-read when a file changes)."""
    try:
        files = sorted(p for p in L.LESSON_DIR.iterdir() if p.suffix.lower() in L.SUFFIXES) \
            if L.LESSON_DIR.is_dir() else []
        signature = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    except OSError:
        signature = ()
    return _shipped(signature)


def draft() -> L.Draft:
    return st.session_state.setdefault(DRAFT, L.Draft())


def all_lessons() -> dict[str, L.Lesson]:
    """id -> lesson: the shipped ones, this session's uploads, and the draft once it has a step."""
    found = {lesson.id: lesson for lesson in shipped()[0]}
    found.update(st.session_state.get(UPLOADS, {}))
    if draft().steps:
        found[DRAFT_ID] = draft().lesson(DRAFT_ID)
    return found


def _projector_on() -> bool:
    return bool(st.session_state.get("projector", False))


# --------------------------------------------------------------------------------------------- navigation
def _go(lesson: L.Lesson, index: int, start: bool = False) -> None:
    """Button callback: open step `index` (0-based) of `lesson` at the start of the next run.

    The target view's own keys are dropped from st.session_state so that it reads them from the step's URL (a
    widget seeds itself from the URL only when its key is not in the session yet). Starting a lesson switches
    projector mode on when the lesson asks for it; later steps keep the learner's choice. "Update while typing"
    is switched off: the live input reports its new text in an extra rerun that carries the previous step's
    widget values, which would overwrite the step's settings.
    """
    step = lesson.steps[index]
    for key in PARAMS.get(step.page, {}):
        st.session_state.pop(key, None)
    state.forget_tokens(step.page)  # its token selectors take the step's values, not the last sentence's tokens
    forget_sentence_input()
    if start and lesson.projector:
        st.session_state["projector"] = True
    st.session_state["live"] = False
    st.session_state[GOTO] = (L.view_script(step.page), L.step_query(lesson, index, _projector_on()))
    st.session_state[SCROLL_TOP] = True


def _reset(page: str) -> None:
    """Button callback: reopen `page` with its declared defaults (its keys dropped from the session and the URL)."""
    for key in PARAMS.get(page, {}):
        st.session_state.pop(key, None)
    state.forget_tokens(page)
    forget_sentence_input()
    st.session_state[GOTO] = (L.view_script(page), {})
    st.session_state[SCROLL_TOP] = True


def _leave(lesson_id: str) -> None:
    st.session_state[GOTO] = (L.view_script(LESSONS_PATH), {L.LESSON_PARAM: lesson_id})
    st.session_state[SCROLL_TOP] = True


def follow() -> None:
    """Switch to the page a lesson button asked for (st.switch_page cannot run inside a callback)."""
    target = st.session_state.pop(GOTO, None)
    if target:  # projector mode goes with every switch: a widget's state does not survive st.switch_page itself
        script, query = target
        st.switch_page(script, query_params={**query, "projector": "1" if _projector_on() else "0"})


def context() -> tuple[str, int | None] | None:
    """(lesson id, 0-based step or None when the number is not valid) from the URL, or None outside a lesson."""
    lesson_id, raw = state.url_value(L.LESSON_PARAM), state.url_value(L.STEP_PARAM)
    if not lesson_id or raw is None:
        return None
    try:
        return lesson_id, int(raw) - 1
    except ValueError:
        return lesson_id, None


def frame(url_path: str) -> DeltaGenerator | None:
    """Called by app.py before each page runs: pending lesson navigation, the lesson panel, the export tool.

    Returns the container the page runs in: the left column beside the lesson panel during a lesson step, else None
    (the page takes the whole width).
    """
    follow()
    page = url_path or HOME.url_path
    area = None
    rec = export.start(page)  # what the page shows in this run: the view's HTML download
    if page != LESSONS_PATH:
        where = context()
        if where is not None:
            area = lesson_bar(page, *where)
            if area is not None and where[1] is not None:
                export.keep_step(where[0], where[1], rec)
        if page in PARAMS:
            export_tool(page)
            with st.sidebar:
                export.download_view(rec, page)
                if where is None:  # a lesson step has its own Reset (back to the step's settings)
                    st.button("Reset this view", key="_view_reset", icon=":material/restart_alt:", on_click=_reset,
                              args=(page,), help="Back to the view's defaults: its model, sentence and settings.")
    if st.session_state.pop(SCROLL_TOP, False):
        scroll_to_top()
    return area


def scroll_to_top() -> None:
    """Open the page at its top: Streamlit keeps the scroll position of the page a button was pressed on."""
    st.html(SCROLL_SCRIPT.format(next(_SCROLLS)), unsafe_allow_javascript=True)


def lesson_bar(page: str, lesson_id: str, index: int | None) -> DeltaGenerator | None:
    """The lesson panel beside the view of a step: progress, Previous / Next, what to notice and the question.

    The panel stands to the right of the view instead of above it, so that the view's main chart stays in the
    first screen of a 1280×800 projector (tests/test_browser.py checks every step of every shipped lesson).
    Returns the column the view runs in, or None when the step cannot be shown (a message is shown instead).
    """
    lesson = all_lessons().get(lesson_id)
    if lesson is None:
        st.info(f"This link belongs to the lesson '{md(lesson_id[:64])}', which is not on this server (uploaded "
                "lessons and drafts last one browser session). The view below opens in the state the link describes.")
        return None
    if index is None or not 0 <= index < len(lesson):
        st.info(f"{md(lesson.title)} has {len(lesson)} steps: step {md(str(state.url_value(L.STEP_PARAM))[:40])} does "
                "not exist.")
        st.button("Open step 1", key="_lesson_first", on_click=_go, args=(lesson, 0))
        return None
    step, n = lesson.steps[index], len(lesson)
    if lesson.missing:
        st.warning(unavailable_text(lesson.missing))
    if step.page != page:
        with st.container(border=True, key="lesson_bar"):
            st.info(f"{md(lesson.title)}, step {index + 1} of {n}, opens the view {L.view_title(step.page)}.")
            st.button(f"Open step {index + 1}", key="_lesson_reopen", on_click=_go, args=(lesson, index))
        return None
    with st.sidebar:  # ← and → move between the steps (the sidebar: the script takes no room beside the view)
        st.html(KEYS_SCRIPT, unsafe_allow_javascript=True)
    view, side = st.columns(PANEL_SPLIT, gap="medium")
    with side, st.container(border=True, key="lesson_bar"):
        st.progress((index + 1) / n, text=f"{md(lesson.title)} · Step {index + 1} of {n}: {md(step.title)}")
        back, forward = st.columns(2)
        back.button("Previous", key="_lesson_prev", icon=":material/arrow_back:", disabled=index == 0,
                    on_click=_go, args=(lesson, index - 1), width="stretch")
        if index + 1 < n:
            forward.button("Next", key="_lesson_next", icon=":material/arrow_forward:", type="primary",
                           on_click=_go, args=(lesson, index + 1), width="stretch")
        else:
            forward.button("Finish", key="_lesson_finish", icon=":material/flag:", type="primary", on_click=_leave,
                           args=(lesson.id,), width="stretch")
        if step.question:  # above the notes: the question and the buttons stay in the first screen
            st.markdown(f"**Question for the class.** {step.question}")
        progress_title = f"{lesson.title} · Step {index + 1} of {n}: {step.title}"
        with st.container(height=notes_height(progress_title, step.question or "", settings.projector()),
                          border=False, key="lesson_notes"):
            st.markdown(f"**What to notice.** {step.caption}")  # a long note scrolls in its box
        export.download_lesson(lesson)
        tools = st.columns(2)
        tools[0].button("Reset", key="_lesson_reset", icon=":material/restart_alt:", on_click=_go,
                        args=(lesson, index), type="tertiary", help="Back to the step's settings after exploring.")
        tools[1].button("All lessons", key="_lesson_all", icon=":material/school:", on_click=_leave, args=(lesson.id,),
                        type="tertiary")
    return view


# ------------------------------------------------------------------------------------------------- export
def view_values(page: str) -> dict[str, str]:
    """The view's current state as URL values: the parameters it wrote to the URL, with the session's newer values."""
    values: dict[str, object] = {}
    for key in PARAMS.get(page, {}):
        raw = state.url_value(key)
        if raw is None:
            continue
        values[key] = st.session_state[key] if key in st.session_state else raw
    return L.current_params(page, values)


def _add_to_draft(step: L.Step) -> None:
    draft().steps.append(step)
    for key in ("_export_title", "_export_caption", "_export_question"):  # empty fields for the next step
        st.session_state.pop(key, None)


def export_tool(page: str) -> None:
    """Sidebar: save the current view (its page and URL state) as a lesson step: download it or add it to the draft."""
    with st.sidebar.expander("Save this view as a lesson step", icon=":material/bookmark_add:"):
        st.caption("The step reopens this view exactly as it is now (model, text and every setting in the URL).")
        title = state.checked_text(st.text_input("Step title", key="_export_title", max_chars=200,
                                                 placeholder=L.view_title(page)), 200, "The step title", stop=False)
        caption = state.checked_text(st.text_area("What to notice", key="_export_caption", max_chars=4000, height=90),
                                     4000, "What to notice", stop=False)
        question = state.checked_text(st.text_area("Question for the class (optional)", key="_export_question",
                                                   max_chars=4000, height=68), 4000, "The question", stop=False)
        if not caption.strip():
            st.caption("Write what to notice, then download the step or add it to your draft lesson.")
            return
        try:
            step = L.make_step(page, view_values(page), title.strip() or L.view_title(page), caption, question)
        except L.LessonError as exc:
            st.warning(f"This view cannot be saved as a step: {md_message(exc.reason)}")
            return
        if step.query.get("model", "").startswith("upload:"):
            st.caption("This view uses an uploaded model: it lasts as long as this server process, so the step "
                       "will not open it elsewhere.")
        st.download_button("Download the step (YAML)", L.step_yaml(step), key="_export_download",
                           file_name=f"step-{page}.yaml", mime="application/x-yaml", icon=":material/download:",
                           width="stretch", on_click="ignore")
        st.button("Add to my draft lesson", key="_export_add", on_click=_add_to_draft, args=(step,),
                  icon=":material/playlist_add:", width="stretch")
        if draft().steps:
            st.caption(f"Draft lesson: {len(draft().steps)} step(s). Play or download it on the Lessons page.")


# -------------------------------------------------------------------------------------------- the page
def _views_of(lesson: L.Lesson) -> str:
    return ", ".join(dict.fromkeys(L.view_title(s.page) for s in lesson.steps))


def _remove_upload(lesson_id: str) -> None:
    st.session_state.get(UPLOADS, {}).pop(lesson_id, None)


def unavailable_text(missing: tuple[tuple[str, str], ...]) -> str:
    """Why a lesson cannot be played here, with the command that installs each model it needs."""
    return "Unavailable here: this lesson opens " + "; ".join(
        f"{md(model_id)}, which is not installed (install it with `{install}` and restart the app)"
        for model_id, install in missing) + "."


def _lesson_card(lesson: L.Lesson, expanded: bool) -> None:
    missing = lesson.missing
    with st.container(border=True, key=f"lesson_{lesson.id}"):
        badge = " · uploaded (this session)" if lesson.origin == "uploaded" else ""
        st.subheader(md(lesson.title), anchor=False)
        st.caption(f"{len(lesson)} steps · {_views_of(lesson)}{badge}" + (" · unavailable here" if missing else ""))
        if lesson.summary:
            st.markdown(lesson.summary)
        if missing:
            st.warning(unavailable_text(missing), icon=":material/extension_off:")
        cols = st.columns([1, 1, 1, 3])
        cols[0].button("Start", key=f"_start_{lesson.id}", icon=":material/play_arrow:", type="primary",
                       on_click=_go, args=(lesson, 0, True), width="stretch", disabled=bool(missing))
        cols[1].download_button("Download", functools.partial(L.lesson_yaml, lesson), file_name=f"{lesson.id}.yaml",
                                mime="application/x-yaml", key=f"_download_{lesson.id}", icon=":material/download:",
                                width="stretch", on_click="ignore")
        if lesson.origin == "uploaded":
            cols[2].button("Remove", key=f"_remove_{lesson.id}", icon=":material/delete:", width="stretch",
                           on_click=_remove_upload, args=(lesson.id,))
        with st.expander("Steps", expanded=expanded):
            if lesson.intro:
                st.markdown(lesson.intro)
            base = str(getattr(st.context, "url", "") or "").split("?")[0].rsplit("/", 1)[0]
            for i, step in enumerate(lesson.steps):
                head, go = st.columns([6, 1], vertical_alignment="center")
                head.markdown(f"**{i + 1}. {md(step.title)}** · {L.view_title(step.page)}")
                go.button("Open", key=f"_open_{lesson.id}_{i}", on_click=_go, args=(lesson, i, True), width="stretch",
                          disabled=bool(missing))
                st.markdown(f"{step.caption}" + (f"\n\n*Question:* {step.question}" if step.question else ""))
                st.code(L.step_url(lesson, i, base), language=None, wrap_lines=True)


def _upload_section(known: set[str]) -> None:
    st.subheader("Upload a lesson", anchor=False)
    upload = st.file_uploader(f"A lesson file (.yaml, .yml, or .md with YAML front matter), at most "
                              f"{L.max_lesson_bytes() / 1024:,.0f} KB",
                              type=["yaml", "yml", "md"], key="_lesson_upload", max_upload_size=MAX_UPLOAD_MB,
                              help="It stays in this browser session only; share it as a file.")
    if upload is None:
        return
    outcomes = st.session_state.setdefault(UPLOAD_OUTCOMES, {})  # file id -> ("error", message) | ("ok", lesson id)
    if upload.file_id not in outcomes:  # read each uploaded file once (so that Remove sticks)
        try:
            L.check_lesson_size(upload.size, upload.name[:120])
            data = upload.getvalue()
            uploads = st.session_state.setdefault(UPLOADS, {})
            lesson_id = L.slug(upload.name)
            if lesson_id in known or lesson_id == DRAFT_ID or lesson_id in uploads:
                lesson_id = f"upload-{hashlib.sha256(data).hexdigest()[:8]}"
            lesson = L.parse_bytes(data, upload.name, lesson_id, "uploaded")
            uploads[lesson.id] = lesson
            outcomes[upload.file_id] = ("ok", lesson.id)
            st.rerun()  # list it with the others
        except L.LessonError as exc:
            outcomes[upload.file_id] = ("error", f"This lesson cannot be used. {exc}")
    kind, value = outcomes[upload.file_id]
    if kind == "error":
        st.error(md_message(value))
    elif value in st.session_state.get(UPLOADS, {}):
        lesson = st.session_state[UPLOADS][value]
        st.success(f"Added “{md(lesson.title)}” ({len(lesson)} steps) for this session.")


def _draft_section() -> None:
    d = draft()
    st.subheader("Your draft lesson", anchor=False)
    if not d.steps:
        st.caption("Open any view, set it up, and use **Save this view as a lesson step** in the sidebar: each "
                   "saved step is added here. Then play the draft or download it as a lesson file.")
        return
    d.title = state.checked_text(st.text_input("Title of the draft", value=d.title, key="_draft_title", max_chars=200),
                                 200, "The draft's title", stop=False)
    for i, step in enumerate(d.steps):
        row = st.columns([6, 1], vertical_alignment="center")
        row[0].markdown(f"{i + 1}. **{md(step.title)}** · {L.view_title(step.page)} — {step.caption}")
        row[1].button("Remove", key=f"_draft_remove_{i}", on_click=d.steps.pop, args=(i,), width="stretch")
    lesson = d.lesson(DRAFT_ID)
    cols = st.columns([1, 1, 1, 3])
    cols[0].button("Play", key="_draft_play", on_click=_go, args=(lesson, 0, True), icon=":material/play_arrow:",
                   width="stretch")
    cols[1].download_button("Download", functools.partial(L.lesson_yaml, lesson), file_name="my-lesson.yaml",
                            mime="application/x-yaml", key="_draft_download", icon=":material/download:",
                            width="stretch", on_click="ignore")
    cols[2].button("Clear", key="_draft_clear", on_click=d.steps.clear, icon=":material/delete:", width="stretch")


def _format_section() -> None:
    with st.expander("Write your own lesson: the file format"):
        st.markdown("A lesson is a YAML file (or a Markdown file whose front matter is this YAML; the Markdown below "
                    "it is the introduction). Put it in `assets/lessons/` on the server, or upload it above. Each "
                    "step opens a view (`page`) with its query parameters (`params`): the same names as in the "
                    "view's URL, so the easiest way to write a step is to set the view up and save it from the "
                    "sidebar.")
        st.code(EXAMPLE, language="yaml")
        rows = [{"page": page, "view": L.view_title(page), "parameters": ", ".join(PARAMS[page]) or "—"}
                for page in L.view_pages()]
        st.dataframe(rows, hide_index=True, width="stretch")
        st.caption("Every view also reads `projector` (true/false). Values are checked when the file is read: a "
                   "mistake gets a message naming the step and the field.")


EXAMPLE = """\
title: The forget gate
summary: What an LSTM keeps and what it forgets.
projector: true            # projector mode on when the lesson starts (default)
steps:
  - title: Forget gates on an agreement sentence
    page: lstm-gates
    params:
      model: builtin:lstm-lm
      text: the keys to the old cabinet are on the table .
      gate: f
      sort: mean
    caption: Most forget gates stay near 1 while the subject's number is carried to the verb.
    question: Which unit changes when the subject is read?
"""


def lessons_page() -> None:
    """The Lessons page: every lesson with Start, its steps and links; upload; the draft; the file format."""
    page_header("Lessons", "Each lesson is a sequence of views in a given state, with what to notice and a question "
                           "for the class. Start one: Previous and Next move through it; projector mode is on.")
    lessons, errors = shipped()
    for error in errors:
        st.error(f"A lesson file in assets/lessons cannot be used. {md_message(error)}")
    known = {lesson.id for lesson in lessons}
    wanted = state.url_value(L.LESSON_PARAM)
    listed = [lesson for lesson in all_lessons().values() if lesson.origin != "draft"]  # the draft has its section
    if not listed:
        st.info("No lessons yet: upload one below or save views as steps from the sidebar.")
    for lesson in listed:
        _lesson_card(lesson, expanded=lesson.id == wanted)
    st.divider()
    _upload_section(known)
    _draft_section()
    _format_section()
