"""Seq2seq alignment: Bahdanau and Luong attention, HF cross-attention, step-by-step decoding and beam search."""
import streamlit as st

from explorer.probes.seq2seq import Seq2SeqError, alignment_trace
from explorer.text.escape import md, md_message
from explorer.ui import seq2seq_panels as P
from explorer.ui import settings
from explorer.ui.cache import get_model, probe
from explorer.ui.charts import caption
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, model_picker, page_header, what_to_notice

c = Controls("seq2seq")
DECODING = {"greedy": "greedy decoding", "beam": "beam search"}
page_header("Seq2seq alignment", "Type a source sentence: the encoder–decoder translates it, and the attention "
            "shows which source words each output word reads. Step through the decoding, force a translation, "
            "compare models, and watch beam search.")
theme = settings.theme()

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
    decoding: str = c.selectbox("decoding", format_func=DECODING.get, disabled=bool(target.strip()),
                           label_visibility="collapsed")
beam = c.params["beam"].default
if decoding == "beam" and not target.strip():
    with options:
        beam = c.number("beam", slider=True)

trace = probe(alignment_trace, loaded, text, target, decoding, beam)  # a Seq2SeqError: said, the page stops
for note in trace.notes:
    st.info(md_message(note))
for warning in trace.warnings:
    st.warning(md_message(warning))
if not trace.out_ids:
    st.stop()

layer, head = 0, "mean"
if trace.kind == "hf":
    with c_layer:
        layer = c.selectbox("layer", list(range(trace.n_layers)), default=trace.n_layers - 1,
                            format_func=lambda i: f"layer {i}", label_visibility="collapsed")
    with c_head:
        head = c.selectbox("head", ["mean", *map(str, range(trace.n_heads))], label_visibility="collapsed",
                           format_func=lambda h: "mean over heads" if h == "mean" else f"head {h}")

T = len(trace.out_ids)
charts = st.container()  # the heatmap(s), drawn once the step slider under them has a value (its row is outlined)
mode_text = {"greedy": "greedy decoding", "beam": f"beam search (beam size {trace.beam_size})",
             "forced": "your target, teacher-forced"}[trace.mode]
st.markdown(f"**Output** ({mode_text}): {md(trace.output_text) or '∅ (only the end token)'}")
caption(f"{len(trace.src_tokens)} source tokens → {T} output steps · sum log p = {trace.step_logprobs.sum():.4f}"
           + (f" · teacher-forced loss (mean cross-entropy) = {trace.loss:.5f}" if trace.mode == "forced" else ""))
step = c.token("step", trace.out_tokens, c.params["step"].default, slider=True) if T > 1 else 0  # follows the output
step = min(step, T - 1)


def alignment_charts() -> None:
    """The model's heatmap (key "alignment": the view's main chart), or both models' side by side."""
    if model2_id == "none":
        P.show_alignment(trace, "a", layer, head, step)
        return
    loaded2 = get_model(model2_id)
    left, right = st.columns(2)
    with left:
        st.markdown(f"**{md(model_id)}**: {md(trace.output_text)}")
        P.show_alignment(trace, "a", layer, head, step, fold=P.COMPARED_FOLD, share=0.5)
    with right:
        if loaded2 is None:
            return
        try:
            trace2 = probe(alignment_trace, loaded2, text, target, decoding, beam, raising=True)
        except Seq2SeqError as exc:
            st.warning(md_message(exc))
            return
        for warning in trace2.warnings:
            st.warning(md_message(warning))
        st.markdown(f"**{md(model2_id)}**: {md(trace2.output_text)}")
        if trace2.out_ids:
            l2 = min(layer, max(trace2.n_layers - 1, 0))
            h2 = head if head == "mean" or int(head) < trace2.n_heads else "mean"
            P.show_alignment(trace2, "b", l2, h2, step if step < len(trace2.out_ids) else None, fold=P.COMPARED_FOLD,
                             share=0.5)


with charts:
    alignment_charts()


PANELS = {"step": "Step by step", "length": "Accuracy against source length", "beam": "Beam search tree"}
panels = ["step", "length"] + (["beam"] if trace.mode == "beam" and trace.beam else [])
panel = c.radio("panel", panels, default="beam" if "beam" in panels else "step", format_func=PANELS.get)

if panel == "step":
    P.step_panel(trace, step, layer, head)
elif panel == "beam":
    P.tree_panel(trace)
else:
    P.length_panel(c, loaded, model2_id)

what_to_notice(P.NOTICE)
