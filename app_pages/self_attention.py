"""Self-attention: per-head maps, the layers × heads grid, rollout, masks and the Q·K/√d softmax arithmetic."""
import streamlit as st

from explorer.presenters import self_attention as P
from explorer.probes.self_attention import (STREAM_LABELS, AttentionError, AttentionShape, attention_notice,
                                            attention_shape, attention_trace, compare_default, pronoun_example,
                                            second_text)
from explorer.text.escape import md, md_message
from explorer.ui.cache import get_model, probe, stop_with
from explorer.ui.compare import compare_picker
from explorer.ui.present import Place, draw, notice, theme
from explorer.ui.state import Controls, follow_default
from explorer.ui.widgets import model_picker, model_sentence, page_header

c = Controls("self-attention")  # the view's declared widgets (configuration only: shared safely)
FOLDS: dict[str, Place] = {"head_heatmap": {"fold": True}, "model_view": {"fold": True}, "steps_bars": {"fold": 330},
         "mask": {"fold": 340}, "masked_heatmap": {"fold": 340}, "compare_bars": {"fold": 380}}


@st.fragment
def sentence_part(loaded, mode: str, stream: str, pad: int, pair: str, layer: int, heads: list[int], how: str,
                  hide: bool, other_id: str | None) -> None:
    """The sentence and everything drawn from it. A fragment: typing a sentence (or picking a query token) reruns
    this part only, not the app's navigation, sidebar, lesson bar and the controls above, which are its
    arguments."""
    c_text, c_token = st.columns([3.6, 1.4], vertical_alignment="bottom")
    with c_text:
        text = model_sentence(loaded, c.view.sentences)
    try:  # said here: the fragment ends, the rest of the page stays
        trace = probe(attention_trace, loaded, text, pair, stream, pad, arithmetic=mode == "steps", raising=True)
    except AttentionError as exc:
        st.warning(md_message(exc))
        return
    token = -1
    if trace.tokens:
        options, first, labels = P.query_menu(trace)
        with c_token:  # follows the sentence
            token = c.token("token", trace.tokens, first, options, format_func=labels.get,
                            label_visibility="collapsed")
    other = second = None
    if other_id and mode in ("head", "model") and trace.tokens and (loaded_b := get_model(other_id)) is not None:
        try:
            other = probe(attention_trace, loaded_b, text, pair, stream, pad, arithmetic=False, raising=True)
        except AttentionError as exc:
            st.warning(f"{md(other_id)} cannot be compared here: {md_message(exc)}")
        if other is not None and not other.tokens:
            st.warning(f"{md(other_id)} cannot be compared here: it read no tokens")
            other = None
    if mode == "compare" and trace.tokens:
        partner = compare_default(loaded) or c.params["text2"].default  # a causal model: its own pair's
        follow_default("text2", partner)
        second = probe(attention_trace, loaded, c.text_input("text2", partner), "", stream, 0)  # the same model
    draw(P.present(trace, mode, layer, heads, how, token, hide, theme(), other, second), FOLDS)


page_header("Self-attention", "Every layer and head of a transformer reading your sentence: who attends to whom, "
            "with which weight, and the arithmetic softmax(QKᵀ/√d + M)·V that produced it.")

c_model, c_mode, c_layer, c_head, c_more = st.columns([1.85, 1.25, 0.75, 0.85, 1], vertical_alignment="bottom")
with c_model:
    model_id = model_picker(c.view.needs, default=c.params["model"].default, label_visibility="collapsed")
    loaded = get_model(model_id)
if loaded is None:
    st.stop()
with c_mode:
    mode: str = c.selectbox("mode", format_func=P.MODES.get, label_visibility="collapsed")
stream, pad, pair = "", 0, ""
with c_more, st.popover("Options", icon=":material/tune:", width="stretch"):
    if second := second_text(loaded):
        pair = c.text_input("pair", label=P.SECOND_TEXT[second])
    if loaded.caps.alignment is not None:
        stream = c.selectbox("stream", format_func=STREAM_LABELS.get)
    if mode == "masks" and loaded.tokenizer is not None and loaded.caps.alignment is None:
        pad = c.number("pad", slider=True)
    shape: AttentionShape | None = None
    failed: AttentionError | None = None  # a model this view cannot show: said under the controls, the page stops
    try:
        shape = probe(attention_shape, loaded, stream, raising=True)
    except AttentionError as exc:
        failed = exc
    if shape is not None:
        extra = c.multiselect("heads", list(range(shape.n_heads)))
        how = c.radio("agg", format_func=P.AGGS.get) if mode in ("head", "model") else "heads"
        hide = c.toggle("hide")
    other_id = compare_picker(c.view.needs, model_id, same_tokens=True) if mode == "head" else None
if failed is not None:
    stop_with(failed)
assert shape is not None
L, H = shape.n_layers, shape.n_heads
# opened on the head with the most visible pattern on the model's own example sentence (not on the typed one: the
# head stays while the sentence changes); a layer and head in the URL or chosen win
example = loaded.adapter.examples(c.view.sentences).default
on_example = probe(attention_notice, loaded, example, stream)  # what to notice, and the head it opens on
showcase = on_example.showcase if on_example is not None else None
with c_layer:
    layer = c.selectbox("layer", list(range(L)), default=None if showcase is None else showcase.layer,
                        format_func=P.layer_label, label_visibility="collapsed")
with c_head:
    head = c.selectbox("head", list(range(H)), default=None if showcase is None else showcase.head,
                       format_func=P.head_label, label_visibility="collapsed")
sentence_part(loaded, mode, stream, pad, pair, layer, [head, *[h for h in extra if h != head]], how, hide, other_id)
draw(P.header(shape, showcase, mode))
notice(P.notices(example, on_example, probe(pronoun_example, loaded, stream)))
