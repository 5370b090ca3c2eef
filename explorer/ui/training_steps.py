"""The training-step control: a model trained with snapshots (explorer.loading.catalogue.series_steps) is read at a
chosen optimiser step of its training, kept in ?train_step=; the play button steps through the snapshots.

The view keeps its sentence and controls; only the model changes: the step's snapshot is the catalogue id
`<id>@<step>` (explorer.loading.loaders), cached like any model, so its results are cached apart from the trained
model's. The last step is the trained checkpoint itself.
"""
from __future__ import annotations

import math

import time
from typing import Sequence

import streamlit as st

from explorer.adapters.protocols import Loaded
from explorer.loading.catalogue import ModelId, as_trained, series_meta, series_steps
from explorer.loading.loaders import LoadedModel
from explorer.runtime.json_value import JSONDict, get
from explorer.text.escape import md
from explorer.ui import state
from explorer.ui.cache import get_model
from explorer.ui.sentence_box import forget_sentence_input

KEY = "train_step"
PLAYING = "_train_playing"
LAST_TICK = "_train_tick"
SERIES = "_train_series"  # the model whose steps KEY counts
AT = "_train_at"  # the step shown while playing
PLAY_SECONDS = 1.5  # between two steps while playing


def nearest(steps: Sequence[int], step: int) -> int:
    """The step of `steps` closest to `step` (the earlier one on a tie)."""
    return min(steps, key=lambda s: (abs(s - step), s))


def _parse(raw: str) -> int:
    """A step from the URL: a whole number ("640", "6.4e2"); `inf`, `nan` and `1e400` raise ValueError."""
    number = float(raw.strip())
    if not math.isfinite(number):
        raise ValueError(f"{raw[:20]!r} is not a finite number")
    return int(number)


def _toggle_play(steps: tuple[int, ...]) -> None:
    """Play from the step shown (from the first when at the last), or pause where the play has got to. While
    playing, the step is kept in AT and the slider is not drawn (a slider in a closed popover would send back its
    old value with every rerun); paused, the slider starts from it."""
    playing = not st.session_state.get(PLAYING, False)
    st.session_state[PLAYING] = playing
    if playing:
        at = st.session_state.get(KEY, steps[-1])
        st.session_state[AT] = steps[0] if at == steps[-1] else at
        st.session_state[LAST_TICK] = time.monotonic()
    else:
        st.session_state[KEY] = st.session_state.get(AT, steps[-1])


def _play(steps: tuple[int, ...]) -> None:
    """While playing: every PLAY_SECONDS, the next step (a rerun of the page); at the last step, stop."""

    @st.fragment(run_every=PLAY_SECONDS)
    def tick() -> None:
        if not st.session_state.get(PLAYING):
            return
        if time.monotonic() - st.session_state.get(LAST_TICK, 0.0) < PLAY_SECONDS * 0.9:
            return  # the page's own run, not the timer's
        at = steps.index(st.session_state[AT]) if st.session_state.get(AT) in steps else -1
        if at + 1 >= len(steps):
            st.session_state[PLAYING] = False
            st.session_state[KEY] = steps[-1]
            st.rerun()
        st.session_state[AT] = steps[at + 1]
        st.session_state[LAST_TICK] = time.monotonic()
        st.rerun()

    tick()


def caption(meta: JSONDict, step: int) -> str:
    """What `step` of the series in a checkpoint's meta is: its epoch and held-out loss (the last step: the trained
    checkpoint itself; another: its snapshot, in the dtype it was stored in)."""
    infos = meta.get("snapshots") or []
    last = get(infos, -1, "step")
    end = last if isinstance(last, (int, float)) else step
    if step == end:
        loss = get(meta, "train", "history", -1, "heldout_loss")
        said = f" · held-out loss {loss:.3f}" if isinstance(loss, float) else ""
        return f"Step {end:,} of {end:,}: the trained model{said}"
    snapshots = infos if isinstance(infos, list) else []
    info: JSONDict = next((i for i in snapshots if isinstance(i, dict) and i.get("step") == step), {})
    loss = info.get("heldout_loss")
    said = f" · held-out loss {loss:.3f}" if isinstance(loss, float) else ""
    stored = f" · {info['dtype']} weights" if info.get("dtype") else ""
    return f"Step {step:,} of {end:,} · epoch {info.get('epoch', 0)}{said}{stored}"


def _forget() -> None:
    """No step chosen: the session's and the URL's dropped, playing stopped."""
    st.session_state.pop(KEY, None)
    st.session_state.pop(AT, None)
    st.session_state[PLAYING] = False
    if state.url_value(KEY) is not None:
        del st.query_params[KEY]


def trained_model(loaded: Loaded) -> LoadedModel | None:
    """The trained checkpoint of a snapshot (`loaded` read at a training step: meta["snapshot"]), loaded like any model,
    for what a view keeps fixed across the steps (an order, a colour range); None for any other model."""
    snap = getattr(loaded, "meta", {}).get("snapshot")
    return get_model(snap["base"]) if isinstance(snap, dict) and snap.get("base") else None


def step_control(model_id: str) -> str:
    """Beside the model picker: for a model trained with snapshots, a button naming the step shown ("trained", "step
    640") that opens the training-step slider, the play button and what the step is; returns the id of the model at
    the chosen step (`model_id` itself at the last step, or for a model without snapshots)."""
    steps = series_steps(model_id)
    if not steps:
        _forget()
        st.session_state.pop(SERIES, None)
        return model_id
    base = ModelId.parse(model_id).base
    if st.session_state.get(SERIES, base) != base:  # another model's series: start at its trained checkpoint
        _forget()
    st.session_state[SERIES] = base
    implied = ModelId.parse(model_id).step  # ?model=builtin:lstm-lm@640 opens at step 640
    state.seed(KEY, steps[-1] if implied is None else implied, _parse)
    chosen = st.session_state.get(KEY)
    note = ""
    if not isinstance(chosen, int) or chosen not in steps:
        st.session_state[KEY] = nearest(steps, chosen) if isinstance(chosen, int) else steps[-1]
        if isinstance(chosen, int):
            note = f"Step {chosen:,} has no snapshot: showing the nearest one, step {st.session_state[KEY]:,}."
    playing = bool(st.session_state.get(PLAYING)) and st.session_state.get(AT) in steps
    at = int(st.session_state[AT] if playing else st.session_state[KEY])
    label = "end" if at == steps[-1] else f"{at:,}"
    with st.container(key="train_step_button"), st.popover(  # key: its narrow padding (settings.HEADER_CSS)
            f"{'▶ ' if playing else ''}{label}", icon=":material/history:", width="stretch",
            help="The training step the view reads the model at (end: the trained model): a slider over its snapshots "
                 "and a play button"):
        col_slider, col_play = st.columns([5, 1], vertical_alignment="bottom")
        with col_slider:
            if playing:
                step = at
                st.markdown(f"Playing: step **{at:,}** of {steps[-1]:,}")
            else:
                step = st.select_slider("Training step", options=list(steps), key=KEY, format_func=lambda s: f"{s:,}",
                                        help="The model as it was at this optimiser step of its training (its "
                                             "snapshot, stored in float16 and computed in float32); the sentence "
                                             "and the view's settings stay, only the model changes.")
        with col_play:
            st.button("", icon=":material/pause:" if playing else ":material/play_arrow:",  # a font's ⏸ may be a box
                      key="train_play", on_click=_toggle_play, args=(steps,),
                      help="Pause" if playing else "Play: step through the snapshots")
        st.caption(md(caption(series_meta(model_id) or {}, step)))
    if step != steps[-1] or state.url_value(KEY) is not None:
        state.write(KEY, step)
    if note:
        st.info(note)
    if playing:
        _play(steps)
    return as_trained(f"{base}@{step}")


def open_view(url_path: str, params: dict[str, str]) -> None:
    """Open the view `url_path` with `params` (e.g. a model at a training step): its own keys are dropped from the
    session first, so that it reads them from the URL (as a lesson step opens its view)."""
    from explorer.lessons import view_script
    from explorer.views import PARAMS

    for key in PARAMS.get(url_path, {}):
        st.session_state.pop(key, None)
    st.session_state.pop(SERIES, None)
    state.forget_tokens(url_path)
    forget_sentence_input()
    st.switch_page(view_script(url_path), query_params=params)
