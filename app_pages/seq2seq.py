"""Seq2seq alignment: Bahdanau and Luong attention, HF cross-attention, step-by-step decoding and beam search."""
import streamlit as st

from explorer.loading.catalogue import builtin_metas
from explorer.presenters import seq2seq as P
from explorer.probes.seq2seq import Seq2SeqError, alignment_trace, builtin_length_curves, corpus_of, length_accuracy
from explorer.text.escape import md_message
from explorer.ui.cache import get_model, probe
from explorer.ui.present import Place, draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, model_picker, page_header

c = Controls("seq2seq")
ALONE: dict[str, Place] = {"alignment": {"fold": True}, "reliance": {"key": "reliance_a", "fold": P.COMPARED_FOLD}}
BESIDE: dict[str, Place] = {name: {"fold": P.COMPARED_FOLD, "share": 0.5} for name in ("alignment", "alignment_b")}
BESIDE |= {"reliance": {"key": "reliance_a", "fold": P.COMPARED_FOLD, "share": 0.5},
           "reliance_b": {"fold": P.COMPARED_FOLD, "share": 0.5}}
page_header("Seq2seq alignment", "Type a source sentence: the encoder–decoder translates it, and the attention "
            "shows which source words each output word reads. Step through the decoding, force a translation, "
            "compare models, and watch beam search.")

model_id, loaded, text = model_and_sentence(c, label="Source sentence")

# the decoding and, for a transformer, the layer and head; the rest (forced target, second model, beam size) under
# Options
c_decoding, c_layer, c_head, c_more = st.columns([1.4, 0.9, 1.2, 1], vertical_alignment="bottom")
options = c_more.popover("Options", icon=":material/tune:", width="stretch")
with options:
    target = c.text_input("target")
    model2_id = model_picker(c.view.needs, default="none", label=c.params["model2"].label, key="model2",
                             none_label="— no second model —")
with c_decoding:
    decoding: str = c.selectbox("decoding", format_func=P.DECODING.get, disabled=bool(target.strip()),
                                label_visibility="collapsed")
beam = c.params["beam"].default
if decoding == "beam" and not target.strip():
    with options:
        beam = c.number("beam", slider=True)

trace = probe(alignment_trace, loaded, text, target, decoding, beam)  # a Seq2SeqError: said, the page stops
draw(P.messages(trace))
if not trace.out_ids:
    st.stop()

layer, head = 0, "mean"
if trace.kind == "hf":
    with c_layer:
        layer = c.selectbox("layer", list(range(trace.n_layers)), default=trace.n_layers - 1,
                            format_func=P.layer_label, label_visibility="collapsed")
    with c_head:
        head = c.selectbox("head", ["mean", *map(str, range(trace.n_heads))], label_visibility="collapsed",
                           format_func=P.head_label)

T = len(trace.out_ids)
charts = st.container()  # the heatmap(s), drawn once the step slider under them has a value (its row is outlined)
draw(P.output(trace))
step = c.token("step", trace.out_tokens, c.params["step"].default, slider=True) if T > 1 else 0  # follows the output
step = min(step, T - 1)


def alignment_charts() -> None:
    """The model's heatmap (key "alignment": the view's main chart), or both models' side by side."""
    if model2_id == "none":
        draw(P.alignment(trace, layer, head, step, theme()), ALONE)
        return
    loaded2 = get_model(model2_id)
    left, right = st.columns(2)
    with left:
        draw(P.beside(trace, layer, head, step, theme()), BESIDE)
    with right:
        if loaded2 is None:
            return
        try:
            trace2 = probe(alignment_trace, loaded2, text, target, decoding, beam, raising=True)
        except Seq2SeqError as exc:
            st.warning(md_message(exc))
            return
        draw(P.beside(trace2, layer, head, step, theme(), "b"), BESIDE)


with charts:
    alignment_charts()

offered, first = P.panels(trace)
panel = c.radio("panel", offered, default=first, format_func=P.PANELS.get)

if panel == "step":
    draw(P.step_head(trace, step))
    left, right = st.columns([3, 2])
    with left:
        draw(P.step_weights(trace, step, layer, head, theme()), {"step_weights": {"share": 0.6}})
    with right:
        draw(P.candidates(trace, step))
    draw(P.step_math(trace, step, layer, head))
elif panel == "beam":
    draw(P.tree(trace, theme()))
else:
    draw(P.length_head())
    curves = []
    for lm in [loaded] + ([get_model(model2_id)] if model2_id != "none" else []):
        if lm is not None and lm.caps.alignment is not None:  # a Hugging Face one has no curve: the probe says so
            try:
                curves.append(probe(length_accuracy, lm, raising=True))
            except Seq2SeqError:  # no curve for this model: the caption says which have one
                pass
    builtins = builtin_length_curves(builtin_metas(), corpus_of(loaded)) if c.toggle("allcurves") else ()
    draw(P.lengths(curves, builtins, theme()))

notice(P.NOTICE)
