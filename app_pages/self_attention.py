"""Self-attention: per-head maps, the layers × heads grid, rollout, masks and the Q·K/√d softmax arithmetic."""
import streamlit as st

from explorer.probes.self_attention import (STREAM_LABELS, AttentionError, AttentionShape, attention_notice,
                                            attention_shape)
from explorer.text.escape import md
from explorer.ui import attention_views as AV
from explorer.ui.cache import get_model, probe, stop_with
from explorer.ui.charts import caption
from explorer.ui.compare import compare_picker
from explorer.ui.widgets import model_picker, page_header, what_to_notice
from explorer.viz import self_attention as viz

c = AV.c
page_header("Self-attention", "Every layer and head of a transformer reading your sentence: who attends to whom, "
            "with which weight, and the arithmetic softmax(QKᵀ/√d + M)·V that produced it.")

c_model, c_mode, c_layer, c_head, c_more = st.columns([1.85, 1.25, 0.75, 0.85, 1], vertical_alignment="bottom")
with c_model:
    model_id = model_picker(c.view.needs, default=c.params["model"].default, label_visibility="collapsed")
    loaded = get_model(model_id)
if loaded is None:
    st.stop()
with c_mode:
    mode: str = c.selectbox("mode", format_func=AV.MODES.get, label_visibility="collapsed")
stream, pad, pair = "", 0, ""
with c_more, st.popover("Options", icon=":material/tune:", width="stretch"):
    if loaded.family == "encoder":
        pair = c.text_input("pair", label="Second sentence (optional: joined to the first by [SEP], segment B)")
    elif loaded.caps.alignment is not None:  # an encoder-decoder
        pair = c.text_input("pair", label="Decoder text (the target the decoder reads; empty = the same text)")
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
        how = c.radio("agg", format_func=AV.AGGS.get) if mode in ("head", "model") else "heads"
        hide = c.toggle("hide")
    other_id = compare_picker(c.view.needs, model_id, same_tokens=True) if mode == "head" else None
if failed is not None:
    stop_with(failed)
assert shape is not None
L, H = shape.n_layers, shape.n_heads
# opened on the head with the most visible pattern on the model's own example sentence (not on the typed one: the
# head stays while the sentence changes); a layer and head in the URL or chosen win
example = loaded.adapter.examples(c.view.sentences).default
notice = probe(attention_notice, loaded, example, stream)  # also the head it opens on: one run of the example
showcase = notice.showcase if notice is not None else None
with c_layer:
    layer = c.selectbox("layer", list(range(L)), default=None if showcase is None else showcase.layer,
                        format_func=lambda i: f"layer {i}", label_visibility="collapsed")
with c_head:
    head = c.selectbox("head", list(range(H)), default=None if showcase is None else showcase.head,
                       format_func=lambda i: f"head {i}", label_visibility="collapsed")
AV.view(loaded, mode, stream, pad, pair, layer, [head, *[h for h in extra if h != head]], how, hide, other_id)
caption(f"{md(shape.model_id)} · {md(shape.adapter)} · {shape.stream_label} · {L} layers × {H} heads"
        + (" · causal (decoder)" if shape.causal else "")
        + (f" · the view opens on layer {showcase.layer}, head {showcase.head}: {md(showcase.rule)} on the "
           f"example “{md(showcase.text)}”" if showcase is not None else ""))
if mode != "steps":  # static: outside the fragment
    scaled, words = viz.scale_tex(shape.scaling, shape.head_size)
    st.latex(rf"\mathrm{{Attention}}(Q,K,V)=\mathrm{{softmax}}\Big({scaled}+M\Big)V"
             r"\qquad\text{rollout: }\tilde A_l=\mathrm{rownorm}(\tfrac12 A_l+\tfrac12 I),\ R_l=\tilde A_l R_{l-1}")
    caption(words)
what_to_notice(AV.notices(loaded, example, notice, stream))
