"""Streamlit's lazily made container stack (explorer/ui/container_stack.py): the race of two first runs, replayed.

Two session threads make their first Streamlit call at once (a class opening the app). Streamlit creates the
ContextVar of the container stack on first use, without a lock; the replay pauses session U inside that creation,
lets session T create it and enter a container (`with st.sidebar:`), then lets U replace it. Without the module,
T's stack is empty when it leaves the container, and st.fragment's `stack[-1]` raises IndexError (CI met it once on
the self-attention page). With the module imported first, as app.py does, nobody creates the ContextVar twice.
Each replay runs in its own interpreter: it patches Streamlit's singleton.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

REPLAY = """
import sys, threading
import streamlit  # noqa: F401 -- creates the DeltaGenerator singleton (main_dg)
if sys.argv[1] == "fixed":
    import explorer.ui.container_stack  # noqa: F401
from streamlit.delta_generator_singletons import context_dg_stack as S, get_dg_singleton_instance

main = get_dg_singleton_instance().main_dg
made_by = S._default
paused, go = threading.Event(), threading.Event()

def default():  # inside the lazy creation, between its "is it made?" check and its assignment
    if threading.current_thread().name == "U":
        paused.set()
        go.wait(5)
    return made_by()

S._default = default
u = threading.Thread(target=S.get, name="U")  # U's first Streamlit call

def session_t():
    paused.wait(2)  # U is inside the creation (never, once the module made the ContextVar)
    main.__enter__()  # `with st.sidebar:` (any container)
    inside = len(S.get())
    go.set()
    u.join()  # U assigns its ContextVar, when it made one
    main.__exit__(None, None, None)
    after = S.get()
    try:
        after[-1]  # what st.fragment's wrap reads (streamlit/runtime/fragment.py)
        print(inside, len(after), "ok")
    except IndexError as exc:
        print(inside, len(after), type(exc).__name__ + ":", exc)

t = threading.Thread(target=session_t, name="T")
u.start(); t.start(); t.join()
"""


def replay(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", REPLAY, mode], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("mode, expected", [
    ("bare", "2 0 IndexError: tuple index out of range"),  # Streamlit's race: T's stack emptied under it
    ("fixed", "2 1 ok"),  # the ContextVar made once, before the sessions: T's stack is its own
])
def test_two_first_runs_keep_their_container_stacks(mode: str, expected: str) -> None:
    assert replay(mode) == expected


def test_app_makes_the_stack_before_any_streamlit_call() -> None:
    source = (ROOT / "app.py").read_text()
    first_call = re.search(r"\bst\.\w+", source)
    assert first_call is not None and source[first_call.start():].startswith("st.set_page_config")
    assert source.index("import explorer.ui.container_stack") < source.index("import explorer.runtime.preload")
    assert source.index("import explorer.ui.container_stack") < first_call.start()
