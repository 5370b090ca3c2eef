"""The models a class shares (issue 41, item 2): a session unloads only the models it brought (its uploads and the
models it trained), and loads at most EXPLORER_SESSION_LOAD_MB of weights in any minute."""
from __future__ import annotations

import pytest

from explorer.loading.catalogue import BUILTIN_DIR
from test_session_uploads import app_session, separate_sessions  # noqa: F401 -- a fixture: each AppTest its own session


def _catalogue_script() -> None:
    import runpy

    import streamlit as st

    from explorer.loading.uploads import register_upload
    from explorer.ui.cache import get_model, upload_owner

    get_model("builtin:lstm-lm")  # the class's
    if "files" in st.session_state:
        uid = register_upload(st.session_state.pop("files"), owner=upload_owner())
        st.session_state["uid"] = uid
        get_model(uid)  # this session's own
    runpy.run_path("app_pages/catalogue.py")


def _run(**state):
    return app_session(_catalogue_script, 120, **state)


def test_a_session_unloads_only_its_own_models(separate_sessions) -> None:  # noqa: F811
    from explorer.ui.cache import model_cache

    files = [("lstm-lm.safetensors", (BUILTIN_DIR / "lstm-lm.safetensors").read_bytes()),
             ("lstm-lm.json", (BUILTIN_DIR / "lstm-lm.json").read_bytes())]
    alice = _run(files=files)
    uid = alice.session_state["uid"]
    picker = alice.selectbox(key="unload_pick")
    assert [o.split(" · ")[0] for o in picker.options] == [uid]  # not builtin:lstm-lm, though it is loaded
    bob = _run()
    assert not [s for s in bob.selectbox if s.key == "unload_pick"] and not [b for b in bob.button
                                                                            if b.label == "Unload model"]
    assert any("never a session" in c.value for c in bob.caption)
    alice.button[[b.label for b in alice.button].index("Unload model")].click().run()
    loaded = {m.id for m in model_cache().loaded()}
    assert uid not in loaded and "builtin:lstm-lm" in loaded


def _loads_script() -> None:
    import streamlit as st

    from explorer.ui.cache import get_model, model_cache

    ids = ("builtin:rnn-lm", "builtin:gru-lm", "builtin:word2vec")
    if "started" not in st.session_state:
        st.session_state["started"] = True
        for mid in ids:
            model_cache().unload(mid)
    st.session_state["got"] = [get_model(mid) is not None for mid in ids]


def test_a_session_loads_at_most_so_many_models_a_minute(separate_sessions, monkeypatch) -> None:  # noqa: F811
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("EXPLORER_SESSION_LOAD_MB", "3")  # rnn-lm 1.5 MB, gru-lm 2.3 MB: 3.8 MB, over it
    at = AppTest.from_function(_loads_script, default_timeout=120).run()
    assert at.session_state["got"] == [True, True, False]
    (warning,) = at.warning
    text = warning.value.replace("\\", "")  # Markdown-escaped on screen
    assert "loaded 4 MB" in text and "EXPLORER_SESSION_LOAD_MB = 3" in text
    assert "builtin:word2vec can be opened in 60 s" in text
    at.run()  # the two it loaded open at once (not counted again); the third waits for the minute to pass
    assert at.session_state["got"] == [True, True, False]
    other = AppTest.from_function(_loads_script, default_timeout=120)
    other.session_state["started"] = True
    other.run()  # another session has its own minute
    assert other.session_state["got"] == [True, True, True] and not other.warning


@pytest.mark.parametrize("value, expected", [("", 1024), ("3", 3), ("-1", 1024), ("0.5", 0.5)])
def test_the_setting(monkeypatch, value: str, expected: float) -> None:
    from explorer.runtime import budget

    monkeypatch.setenv("EXPLORER_SESSION_LOAD_MB", value)
    assert budget.session_load_bytes() == int(expected * 2**20)
