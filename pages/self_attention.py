"""Self-attention: per-head maps, the layers × heads grid, rollout, masks and the Q·K/√d softmax arithmetic."""
import numpy as np
import streamlit as st

from explorer.adapters.transformer import STREAM_LABELS
from explorer.probes.self_attention import (
    PRESETS,
    attention_shape,
    attention_trace,
    default_query,
    find_token,
    head_matrix,
    hide_special,
    step_by_step,
)
from explorer.ui import settings, state
from explorer.ui.cache import get_model, probe
from explorer.ui.charts import show
from explorer.ui.widgets import model_picker, page_header, sentence_input, sentence_presets, what_to_notice
from explorer.viz import attention as viz

page_header("Self-attention", "Every layer and head of a transformer reading your sentence: who attends to whom, "
            "with which weight, and the arithmetic softmax(QKᵀ/√d + M)·V that produced it.")
theme = settings.theme()

MODES = {"head": "Head view", "model": "Model view (all heads)", "steps": "Step by step (one query)",
         "masks": "Masks", "compare": "Compare two sentences"}
AGGS = {"heads": "chosen head(s)", "mean": "mean over heads", "max": "max over heads", "rollout": "rollout (layers 0…l)"}


def shown(trace, matrix: np.ndarray, hide: bool):
    """The matrix as displayed (special tokens hidden or not), with the note about renormalisation."""
    if not hide:
        return matrix, None, None
    hidden = hide_special(matrix, trace.special, trace.key_special)
    if hidden.renormalised:
        st.caption(f"Special tokens hidden: each remaining row was renormalised to sum to 1 (the hidden tokens held "
                   f"{hidden.removed_mass:.1%} of a row's weight on average).")
    return hidden.matrix, hidden.rows, hidden.cols


def pick(seq, idx):
    return [seq[i] for i in idx] if idx is not None else list(seq)


with st.columns([2, 1])[0]:
    model_id = model_picker(["decoder", "encoder", "encoder-decoder"], default="pretrained:minilm")
loaded = get_model(model_id)
if loaded is None:
    st.stop()
c_mode, c_stream = st.columns([2, 1])
with c_mode:
    mode = state.radio("View", list(MODES), key="mode", default="head", format_func=MODES.get)
stream = ""
if loaded.family == "encoder-decoder":
    with c_stream:
        stream = state.selectbox("Attention", ["encoder", "decoder", "cross"], key="stream",
                                 format_func=STREAM_LABELS.get)
pad = 0
if mode == "masks" and loaded.tokenizer is not None and loaded.family != "encoder-decoder":
    pad = state.slider("Padding tokens appended (attention_mask = 0)", 0, 16, key="pad", default=3)
shape = probe(attention_shape, loaded, stream)
if shape.error:
    st.warning(shape.error)
    st.stop()
L, H = shape.n_layers, shape.n_heads
cols = st.columns([1, 1, 2, 2])
with cols[0]:
    layer = state.selectbox("Layer", list(range(L)), key="layer", default=0)
with cols[1]:
    head = state.selectbox("Head", list(range(H)), key="head", default=0)
with cols[2]:
    extra = state.multiselect("Overlay heads", list(range(H)), key="heads", default=[],
                              help="Several heads of this layer at once: one colour each in the line view, "
                                   "their mean in the heatmap.")
with cols[3]:
    how = state.radio("Aggregation", list(AGGS), key="agg", default="heads", format_func=AGGS.get) \
        if mode in ("head", "model") else "heads"
hide = state.toggle("Hide special tokens ([CLS], [SEP], <s>, </s>, <bos>, [PAD]) and renormalise rows",
                    key="hide", default=False)
st.caption(f"{shape.model_id} · {shape.adapter} · {shape.stream_label} · {L} layers × {H} heads"
           + (" · causal (decoder)" if shape.causal else ""))
sentence_presets(PRESETS[0], PRESETS)  # right above the sentence box, which is in the fragment below


@st.fragment
def view(loaded, mode: str, stream: str, pad: int, layer: int, heads: list[int], how: str, hide: bool) -> None:
    """The sentence and everything drawn from it. A fragment: typing a sentence (or picking a query token) reruns
    this part only, not the app's navigation, sidebar, lesson bar and the controls above, which are its
    arguments."""
    head = heads[0]
    text = sentence_input(PRESETS[0])
    pair = ""
    if loaded.family == "encoder":
        pair = state.text_input("Second sentence (optional: joined to the first by [SEP], segment B)", "pair")
    elif loaded.family == "encoder-decoder":
        pair = state.text_input("Decoder text (the target the decoder reads; empty = the same text)", "pair")

    trace = probe(attention_trace, loaded, text, pair, stream, pad, arithmetic=mode == "steps")
    if trace.error:
        st.warning(trace.error)
        return
    for note in trace.notes:
        st.info(note)
    if not trace.tokens:
        return

    T = len(trace.tokens)
    labels = viz.display_tokens(trace.tokens)
    token = state.selectbox("Query token", [-1, *range(T)], key="token",
                            default=default_query(trace.tokens, trace.special),
                            format_func=lambda i: "— all tokens —" if i < 0 else f"{i}: {labels[i]}",
                            help="Isolates this token's attention (its row).")
    if mode in ("head", "model"):
        maps_view(trace, mode, layer, heads, how, token, hide, labels)
    elif mode == "steps":
        steps_view(trace, layer, head, token)
    elif mode == "masks":
        masks_view(trace, layer, head)
    elif mode == "compare":
        compare_view(loaded, trace, stream, layer, head, token, labels)

    if mode != "steps":
        if 0 <= token < T:
            row_w = trace.attentions[layer, head, token].astype(np.float64)
            j = int(np.argmax(row_w))
            st.caption(f"Live: layer {layer}, head {head}: “{labels[token]}” gives its largest weight "
                       f"a = {row_w[j]:.4f} to “{viz.display_tokens(trace.key_tokens)[j]}”; its row sums to "
                       f"{row_w.sum():.6f}.")
        if not trace.has_arithmetic and trace.arithmetic_note:
            st.caption(trace.arithmetic_note)


def maps_view(trace, mode: str, layer: int, heads: list[int], how: str, token: int, hide: bool,
              labels: list[str]) -> None:
    """Head view (heatmap + line view) or model view (layers × heads grid + the chosen head enlarged)."""
    H, T = trace.n_heads, len(trace.tokens)
    head = heads[0]
    if how == "rollout" and trace.rollout is None:
        st.info("Rollout is defined for self-attention (queries and keys from the same sequence).")
        how = "heads"
    if mode == "model":
        show(viz.model_view(trace.thumbnails, T, trace.stream_label, theme, selected=(layer, head)),
             key="model_view", filename="attention-model-view")
        st.caption("Pick a layer and head above to enlarge it below at full resolution.")
    matrix = head_matrix(trace, layer, heads, how)
    what = {"heads": f"layer {layer}, head {head}" if len(heads) == 1 else
            f"layer {layer}, mean of heads {', '.join(map(str, heads))}",
            "mean": f"layer {layer}, mean over {H} heads", "max": f"layer {layer}, max over {H} heads (rows need "
            "not sum to 1)", "rollout": f"attention rollout through layers 0…{layer}"}[how]
    z, rows, kcols = shown(trace, matrix, hide)
    q_tok, k_tok = pick(trace.tokens, rows), pick(trace.key_tokens, kcols)
    row = None
    if token >= 0:
        row = token if rows is None else (rows.index(token) if token in rows else None)
        if row is None:
            st.caption(f"The selected token “{labels[token]}” is hidden (special token).")
    show(viz.head_heatmap(z, q_tok, k_tok, what, theme, zmax=None if how == "max" else 1.0, rows=rows, cols=kcols,
                          highlight=row), key="head_heatmap", filename=f"attention-L{layer}-H{head}")
    if mode == "head":
        if T > 60 and row is None:
            st.caption(f"{T} tokens: the line view draws the {viz.MAX_LINES:,} strongest lines; pick a query token "
                       "to isolate its row.")
        if how == "heads" and len(heads) > 1:
            mats = [shown(trace, head_matrix(trace, layer, [h]), hide)[0] for h in heads]
            names = [f"head {h}" for h in heads]
        else:
            mats, names = [z], [what]
        show(viz.line_view(mats, names, q_tok, k_tok, theme, query=row, rows=rows, cols=kcols),
             key="line_view", filename=f"attention-lines-L{layer}")


def steps_view(trace, layer: int, head: int, token: int) -> None:
    """The lecture's table for one query: q·k, ÷√d, mask, softmax, a·v, from the layer's own weights."""
    q_idx = token if token >= 0 else default_query(trace.tokens, trace.special)
    steps = step_by_step(trace, layer, head, q_idx)
    if steps is None:
        st.warning(trace.arithmetic_note or "The Q/K/V arithmetic is not available for this model.")
        row_p = trace.attentions[layer, head, q_idx].astype(np.float64)
        st.dataframe({"key": viz.display_tokens(trace.key_tokens), "attention (model)": row_p}, hide_index=True)
        show(viz.steps_figure(trace.key_tokens, None, row_p, trace.tokens[q_idx], theme), key="steps_bars",
             filename=f"attention-row-L{layer}-H{head}")
    else:
        j = int(np.argmax(steps.probs))
        kt = viz.display_tokens(steps.key_tokens)
        qt = viz.display_tokens([steps.query_token])[0]
        finite = np.isfinite(steps.scaled + steps.mask)
        denom = float(np.exp(steps.scaled[finite] - steps.scaled[finite].max()).sum())
        st.latex(r"a_{ij}=\mathrm{softmax}_j\Big(\frac{q_i\cdot k_j}{\sqrt{d}}+M_{ij}\Big),\qquad z_i=\sum_j a_{ij}\,v_j")
        st.latex(
            rf"\text{{“{qt}”}}\to\text{{“{kt[j]}”}}:\ q\cdot k={steps.dots[j]:.4f},\ "
            rf"\tfrac{{q\cdot k}}{{\sqrt{{{steps.d}}}}}={steps.scaled[j]:.4f},\ "
            rf"a=\tfrac{{e^{{{steps.scaled[j] - steps.scaled[finite].max():.3f}}}}}{{{denom:.4f}}}={steps.probs[j]:.5f}"
        )
        scale_txt = f"1/√{steps.d} = {1 / np.sqrt(steps.d):.5f}" if abs(steps.scale * np.sqrt(steps.d) - 1) < 1e-6 \
            else f"{steps.scale:.5f} (this model's scaling)"
        st.markdown(f"Layer {layer}, head {head}, query **{qt}** (token {q_idx}); head size d = {steps.d}; scale "
                    f"{scale_txt}. Q, K, V were recomputed from the layer's own projection weights; the recomputed "
                    f"softmax equals the model's attention to **{steps.max_error:.1e}**.")
        nd = min(4, steps.d)
        table = {"key": kt, "q·k": steps.dots, "÷√d": steps.scaled,
                 "mask": ["−∞" if not np.isfinite(m) else "0" for m in steps.mask],
                 "softmax": steps.probs, "model's weight": steps.model_probs}
        for c in range(nd):
            table[f"k[{c}]"] = steps.keys[:, c]
        for c in range(nd):
            table[f"v[{c}]"] = steps.values[:, c]
        for c in range(nd):
            table[f"a·v[{c}]"] = steps.weighted[:, c]
        st.markdown(f"q (first dims of {steps.d}): " + ", ".join(f"{x:.4f}" for x in steps.q[:8]) +
                    (" …" if steps.d > 8 else ""))
        st.dataframe(table, hide_index=True)
        st.markdown("z = Σ a·v (first dims): " + ", ".join(f"{x:.4f}" for x in steps.z[:8]) +
                    (" …" if steps.d > 8 else ""))
        show(viz.steps_figure(steps.key_tokens, steps.scaled + steps.mask, steps.probs, steps.query_token, theme),
             key="steps_bars", filename=f"attention-steps-L{layer}-H{head}")


def masks_view(trace, layer: int, head: int) -> None:
    """The mask M drawn explicitly (causal −∞ triangle, padding columns) and the weights after the softmax."""
    st.latex(r"\mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d}} + M\Big),\quad M_{ij}=\begin{cases}0 & \text{allowed}\\"
             r"-\infty & \text{masked (future token or padding)}\end{cases}")
    if trace.causal:
        st.markdown("**Causal mask**: a decoder token may not look at later tokens, so M is −∞ above the diagonal "
                    "and those weights are exactly 0 after the softmax.")
    if any(trace.padding):
        st.markdown(f"**Padding mask**: {sum(trace.padding)} [PAD] key(s) get −∞ (attention_mask = 0), so no "
                    "real token attends to them; the padding rows themselves are computed but ignored.")
    if not trace.causal and not any(trace.padding):
        st.markdown("This encoder attends in both directions: M is all zeros (add padding above to see −∞ columns).")
    show(viz.mask_figure(trace.mask, trace.tokens, trace.key_tokens, "The mask M", theme), key="mask",
         filename="attention-mask")
    show(viz.head_heatmap(trace.attentions[layer, head].astype(np.float32), trace.tokens, trace.key_tokens,
                          f"After the softmax: layer {layer}, head {head}", theme), key="masked_heatmap",
         filename=f"attention-masked-L{layer}-H{head}")


def compare_view(loaded, trace, stream: str, layer: int, head: int, token: int, labels: list[str]) -> None:
    """Where the same word looks in two sentences ("…too tired" / "…too wide")."""
    other = state.text_input("Second sentence to compare", "compare", PRESETS[2])
    trace_b = probe(attention_trace, loaded, other, "", stream, 0)
    if trace_b.error or not trace_b.tokens:
        st.warning(trace_b.error or (trace_b.notes[0] if trace_b.notes else "Type a second sentence."))
    else:
        q_idx = token if token >= 0 else default_query(trace.tokens, trace.special)
        word = trace.tokens[q_idx]
        j = find_token(trace_b.tokens, word.replace("Ġ", "").replace("▁", ""))
        if j < 0:
            j = default_query(trace_b.tokens, trace_b.special)
            st.info(f"“{labels[q_idx]}” is not in the second sentence; showing “{trace_b.tokens[j]}” there.")
        lb = min(layer, trace_b.n_layers - 1)
        show(viz.compare_bars(trace.tokens, trace.attentions[layer, head, q_idx].astype(np.float32), trace_b.tokens,
                              trace_b.attentions[lb, head, j].astype(np.float32),
                              f"Where “{labels[q_idx]}” looks, layer {layer}, head {head}: A (left) vs B (right)", theme),
             key="compare_bars", filename="attention-compare")
        c1, c2 = st.columns(2)
        with c1:
            show(viz.head_heatmap(trace.attentions[layer, head].astype(np.float32), trace.tokens, trace.key_tokens,
                                  "A", theme, highlight=q_idx), key="compare_a", filename="attention-compare-a")
        with c2:
            show(viz.head_heatmap(trace_b.attentions[lb, head].astype(np.float32), trace_b.tokens,
                                  trace_b.key_tokens, "B", theme, highlight=j), key="compare_b",
                 filename="attention-compare-b")


view(loaded, mode, stream, pad, layer, [head, *[h for h in extra if h != head]], how, hide)
if mode != "steps":  # static: outside the fragment
    st.latex(r"\mathrm{Attention}(Q,K,V)=\mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d}}+M\Big)V"
             r"\qquad\text{rollout: }\tilde A_l=\mathrm{rownorm}(\tfrac12 A_l+\tfrac12 I),\ R_l=\tilde A_l R_{l-1}")
what_to_notice([
    "Rows sum to 1: each query token distributes one unit of attention over the keys.",
    "In a decoder (causal) the upper triangle is exactly 0: the −∞ mask hides future tokens.",
    "Many BERT heads park their weight on [CLS] or [SEP] (a 'no-op'); hide special tokens to see the rest "
    "(rows are renormalised, the caption says by how much).",
    "Compare “…because it was too tired” with “…too wide”: in some heads “it” shifts from “animal” to “street”.",
    "Rollout mixes the residual path (½ I) with the heads' mean: deeper layers blur towards a few tokens.",
])
