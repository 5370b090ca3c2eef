"""The self-attention view's drawing, called by its page: the sentence fragment (`view`) with its five modes (the
head view and model view, a second model compared, step by step, the masks, two sentences compared) and what to
notice on the model's own example (`notices`)."""
from __future__ import annotations

import contextlib

import streamlit as st

from explorer.adapters.examples import compare_default, pronoun_pair
from explorer.data.examples import PRONOUN
from explorer.loading.loaders import LoadedModel
from explorer.probes.self_attention import (AttentionError, AttentionNotice, PronounShift, attention_trace,
                                            compare_mismatch, default_query, find_token, head_matrix, head_row,
                                            hide_special, pronoun_shift, step_by_step)
from explorer.text.escape import latex_text, md, md_message, plotly_text
from explorer.ui import settings
from explorer.ui.cache import get_model, probe
from explorer.ui.charts import Origin, caption, show, table
from explorer.ui.state import Controls
from explorer.ui.widgets import model_sentence
from explorer.ui.word_embeddings import follow_default
from explorer.viz import self_attention as viz
from explorer.viz.tokens import strongest, vector_text

c = Controls("self-attention")  # the view's declared widgets (configuration only: shared safely)
MODES = {"head": "Head view", "model": "All heads", "steps": "Step by step",  # short: whole at a projector's
         "masks": "Masks", "compare": "Two sentences"}                            # font in their narrow box
AGGS = {"heads": "chosen head(s)", "mean": "mean over heads", "max": "max over heads",
        "rollout": "rollout (layers 0…l)"}



def shown(trace, matrix, hide: bool):
    """The matrix as displayed (special tokens hidden or not), its rows and columns, and the note about the
    renormalisation ("" when nothing was hidden)."""
    if not hide:
        return matrix, None, None, ""
    hidden = hide_special(matrix, trace.special, trace.key_special)
    note = ""
    if hidden.renormalised:
        both = zip((*trace.tokens, *trace.key_tokens), (*trace.special, *trace.key_special))
        names = dict.fromkeys(t for t, s in both if s)  # this model's own, as shown
        note = (f"Special tokens hidden ({', '.join(f'“{md(t)}”' for t in names)}): each remaining row was "
                f"renormalised to sum to 1 (the hidden tokens held {hidden.removed_mass:.1%} of a row's weight on "
                "average).")
    return hidden.matrix, hidden.rows, hidden.cols, note


OWN = Origin("model", "the model's own attention weights on this run (eager attention).")


def pick(seq, idx):
    return [seq[i] for i in idx] if idx is not None else list(seq)



@st.fragment
def view(loaded, mode: str, stream: str, pad: int, pair: str, layer: int, heads: list[int], how: str,
         hide: bool, other_id: str | None = None) -> None:
    """The sentence and everything drawn from it. A fragment: typing a sentence (or picking a query token) reruns
    this part only, not the app's navigation, sidebar, lesson bar and the controls above, which are its
    arguments."""
    head = heads[0]
    c_text, c_token = st.columns([3.6, 1.4], vertical_alignment="bottom")
    with c_text:
        text = model_sentence(loaded, c.view.sentences)

    try:  # said here: the fragment ends, the rest of the page stays
        trace = probe(attention_trace, loaded, text, pair, stream, pad, arithmetic=mode == "steps", raising=True)
    except AttentionError as exc:
        st.warning(md_message(exc))
        return
    for note in trace.notes:
        st.info(md_message(note))
    if not trace.tokens:
        return

    T = len(trace.tokens)
    labels = viz.display_tokens(trace.tokens)
    with c_token:
        token = c.token("token", trace.tokens, default_query(trace.tokens, trace.special), [-1, *range(T)],
                        label_visibility="collapsed",  # follows the sentence
                        format_func=lambda i: "all query tokens" if i < 0 else f"query {i}: {labels[i]}")
    if mode in ("head", "model"):
        trace_b = other_trace(trace, other_id, text, pair, stream, pad, layer, heads) if other_id else None
        row = st.columns(3, gap="small") if trace_b is not None else None  # A | B | B − A, side by side
        maps_view(trace, mode, layer, heads, how, token, hide, labels, row[0] if row else None)
        if trace_b is not None and row is not None:
            other_view(trace, trace_b, layer, heads, how, hide, row[1:])
    elif mode == "steps":
        steps_view(trace, layer, head, token)
    elif mode == "masks":
        masks_view(trace, layer, head)
    elif mode == "compare":
        compare_view(loaded, trace, stream, layer, head, token, labels)

    if mode != "steps":
        if 0 <= token < T:
            weight, key, total = strongest(trace.attentions[layer, head, token], trace.key_tokens)
            caption(f"Live: layer {layer}, head {head}: “{md(labels[token])}” gives its largest weight "
                       f"a = {weight:.4f} to “{md(key)}”; its row sums to {total:.6f}.")
        if not trace.has_arithmetic and trace.arithmetic_note:
            caption(md_message(trace.arithmetic_note))


def other_trace(trace, other_id: str, text: str, pair: str, stream: str, pad: int, layer: int, heads: list[int]):
    """The second model's (?compare=) trace of the same sentence, or None with the reason said."""
    other = get_model(other_id)
    if other is None:
        return None
    try:
        trace_b = probe(attention_trace, other, text, pair, stream, pad, arithmetic=False, raising=True)
        why = "" if trace_b.tokens else "it read no tokens"
    except AttentionError as exc:
        why = str(exc)
    if why:
        st.warning(f"{md(other_id)} cannot be compared here: {md_message(why)}")
        return None
    why = compare_mismatch(trace, trace_b, layer, heads)
    if why:
        st.info(f"{md(other_id)} is not compared with {md(trace.model_id)} here: {md(why)}.")
        return None
    return trace_b


def other_view(trace, trace_b, layer: int, heads: list[int], how: str, hide: bool, into) -> None:
    """The second model's map of the same head and B − A, in the two columns `into` beside the first model's."""
    theme = settings.theme()
    what = f"layer {layer}, head {heads[0]}" if how == "heads" and len(heads) == 1 else f"layer {layer}, {how}"
    z_a, rows, kcols, _ = shown(trace, head_matrix(trace, layer, heads, how), hide)
    z_b, _, _, _ = shown(trace_b, head_matrix(trace_b, layer, heads, how), hide)
    q_tok, k_tok = pick(trace.tokens, rows), pick(trace.key_tokens, kcols)
    with into[0]:
        show(viz.head_heatmap(z_b, q_tok, k_tok, f"B: {plotly_text(trace_b.model_id)}", theme,
                              zmax=None if how == "max" else 1.0, rows=rows, cols=kcols), OWN, key="head_heatmap_b",
             filename=f"attention-L{layer}-compare", fold=True, share=1 / 3)
    with into[1]:
        show(viz.difference_heatmap(z_a, z_b, q_tok, k_tok, "B − A", theme),
             Origin("model", "the difference of the two models' own attention weights on this sentence."),
             key="head_heatmap_diff", filename=f"attention-L{layer}-difference", fold=True, share=1 / 3)
    caption(f"{what}: A = {md(trace.model_id)}, B = {md(trace_b.model_id)}, both on the same scale (weights 0 … 1); "
            f"largest |B − A|: {viz.largest_difference(z_a, z_b):.3f}.")


def maps_view(trace, mode: str, layer: int, heads: list[int], how: str, token: int, hide: bool,
              labels: list[str], first=None) -> None:
    """Head view (heatmap + line view) or model view (layers × heads grid + the chosen head enlarged); first: the
    column the heatmap goes in when a second model is compared beside it (None: the whole width)."""
    theme = settings.theme()
    H, T = trace.n_heads, len(trace.tokens)
    head = heads[0]
    if how == "rollout" and trace.rollout is None:
        st.info("Rollout is defined for self-attention (queries and keys from the same sequence).")
        how = "heads"
    if mode == "model":
        pooled = trace.thumbnails.shape[-1] < T
        show(viz.model_view(trace.thumbnails, T, trace.stream_label, theme, selected=(layer, head)),
             Origin("model", "the model's own attention weights" + (f", each {T}×{T} map max-pooled to "
                             f"{trace.thumbnails.shape[-1]}×{trace.thumbnails.shape[-1]}." if pooled else ".")),
             key="model_view", filename="attention-model-view", fold=True)
        caption("Pick a layer and head above to enlarge it below at full resolution.")
    matrix = head_matrix(trace, layer, heads, how)
    what = {"heads": f"layer {layer}, head {head}" if len(heads) == 1 else
            f"layer {layer}, mean of heads {', '.join(map(str, heads))}",
            "mean": f"layer {layer}, mean over {H} heads", "max": f"layer {layer}, max over {H} heads (rows need "
            "not sum to 1)", "rollout": f"attention rollout through layers 0…{layer}"}[how]
    z, rows, kcols, hidden_note = shown(trace, matrix, hide)
    origin = Origin("model", {"heads": "the model's own attention weights", "mean": "the mean over heads of the "
                              "model's own weights", "max": "the max over heads of the model's own weights",
                              "rollout": "attention rollout (Abnar & Zuidema 2020) computed from the model's own "
                              "weights"}[how] + (", special tokens hidden and rows renormalised." if rows is not None
                                                 else "."))
    q_tok, k_tok = pick(trace.tokens, rows), pick(trace.key_tokens, kcols)
    row = None
    if token >= 0:
        row = token if rows is None else (rows.index(token) if token in rows else None)
        if row is None:
            caption(f"The selected token “{md(labels[token])}” is hidden (special token).")
    with first if first is not None else contextlib.nullcontext():
        show(viz.head_heatmap(z, q_tok, k_tok, what if first is None else f"A: {plotly_text(trace.model_id)}", theme,
                              zmax=None if how == "max" else 1.0, rows=rows, cols=kcols, highlight=row), origin,
             key="head_heatmap", filename=f"attention-L{layer}-H{head}", fold=mode == "head",
             share=1 if first is None else 1 / 3)
    if hidden_note:  # under the chart: it keeps the first screen
        caption(hidden_note)
    if mode == "head":
        if T > 60 and row is None:
            caption(f"{T} tokens: the line view draws the {viz.MAX_LINES:,} strongest lines; pick a query token "
                       "to isolate its row.")
        if how == "heads" and len(heads) > 1:
            mats = [shown(trace, head_matrix(trace, layer, [h]), hide)[0] for h in heads]
            names = [f"head {h}" for h in heads]
        else:
            mats, names = [z], [what]
        show(viz.line_view(mats, names, q_tok, k_tok, theme, query=row, rows=rows, cols=kcols), origin,
             key="line_view", filename=f"attention-lines-L{layer}")


STEPS_FOLD = 330  # the bars of one query's scores sit under two lines of formulas
MASKS_FOLD = 340  # the mask and the weights, side by side under the formula


def steps_view(trace, layer: int, head: int, token: int) -> None:
    """The lecture's table for one query: q·k, ÷√d, mask, softmax, a·v, from the layer's own weights."""
    theme = settings.theme()
    q_idx = token if token >= 0 else default_query(trace.tokens, trace.special)
    steps = step_by_step(trace, layer, head, q_idx)
    if steps is None:
        st.warning(md_message(trace.arithmetic_note or "The Q/K/V arithmetic is not available for this model."))
        row_p = head_row(trace, layer, head, q_idx)
        table({"key": viz.display_tokens(trace.key_tokens), "attention (model)": row_p}, OWN, width="content")
        show(viz.steps_figure(trace.key_tokens, None, row_p, trace.tokens[q_idx], theme), OWN, key="steps_bars",
             filename=f"attention-row-L{layer}-H{head}", fold=STEPS_FOLD)
        return
    j = steps.top
    kt = [latex_text(t) for t in viz.display_tokens(steps.key_tokens)]
    qt = viz.display_tokens([steps.query_token])[0]
    qt_tex = latex_text(qt)
    scaled = rf"\tfrac{{q\cdot k}}{{\sqrt{{{steps.d}}}}}" if steps.standard_scale else rf"{steps.scale:.5f}\,q\cdot k"
    bias = rf",\ b={steps.bias[j]:.4f}" if steps.bias is not None else ""
    arithmetic = Origin("recomputed", f"from the layer's own Q, K, V in float64: the softmax equals the model's "
                                      f"attention to {steps.max_error:.1e}.")
    st.latex(viz.steps_formula(steps))
    st.latex(
        rf"\text{{“{qt_tex}”}}\to\text{{“{kt[j]}”}}:\ q\cdot k={steps.dots[j]:.4f},\ "
        rf"{scaled}={steps.scaled[j]:.4f}{bias},\ "
        rf"a=\tfrac{{e^{{{steps.scaled[j] - steps.max_logit:.3f}}}}}{{{steps.denominator:.4f}}}={steps.probs[j]:.5f}"
        if steps.bias is None and not steps.softcap else
        rf"\text{{“{qt_tex}”}}\to\text{{“{kt[j]}”}}:\ q\cdot k={steps.dots[j]:.4f},\ "
        rf"{scaled}={steps.scaled[j]:.4f}{bias},\ "
        rf"a={steps.probs[j]:.5f}"
    )
    show(viz.steps_figure(steps.key_tokens, steps.logits, steps.probs, steps.query_token, theme),
         arithmetic, key="steps_bars", filename=f"attention-steps-L{layer}-H{head}", fold=STEPS_FOLD)
    scale_txt = (f"1/√{steps.d} = {steps.scale:.5f}" if steps.standard_scale
                 else f"{steps.scale:.5f} (this model's scaling)")
    st.markdown(f"Layer {layer}, head {head}, query **{md(qt)}** (token {q_idx}); head size d = {steps.d}; scale "
                f"{scale_txt}. Q, K, V are what the model's attention multiplied (read from its run); the recomputed "
                f"softmax equals the model's attention to **{steps.max_error:.1e}**.")
    for note in viz.steps_notes(steps):
        st.markdown(md_message(note))
    if steps.angles is not None:
        table(viz.rope_table(steps), Origin("recomputed", f"the query's rotation with the model's own cos/sin, "
                                                          f"equal to its q to {steps.rope_error:.1e}."),
              width="content")
    st.markdown(f"q (first dims of {steps.d}): " + vector_text(steps.q))
    table(viz.steps_table(steps), arithmetic, width="content")
    st.markdown("z = Σ a·v (first dims): " + vector_text(steps.z))


def masks_view(trace, layer: int, head: int) -> None:
    """The mask M drawn explicitly (causal −∞ triangle, padding columns) and the weights after the softmax."""
    theme = settings.theme()
    scaled, words = viz.scale_tex(trace.scaling, trace.head_size)
    mask, weights = st.columns(2)  # side by side: the mask and what the softmax made of it
    with mask:
        show(viz.mask_figure(trace.mask, trace.tokens, trace.key_tokens, "The mask M", theme),
             Origin("model", "the additive mask this run used."), key="mask", filename="attention-mask",
             fold=MASKS_FOLD, share=0.5)
    with weights:
        show(viz.head_heatmap(head_matrix(trace, layer, [head]), trace.tokens, trace.key_tokens,
                              f"After the softmax: layer {layer}, head {head}", theme),
             Origin("model", "the model's own weights on this run."), key="masked_heatmap",
             filename=f"attention-masked-L{layer}-H{head}", fold=MASKS_FOLD, share=0.5)
    # the formula under the charts: they keep the first screen
    st.latex(rf"\mathrm{{softmax}}\Big({scaled} + M\Big),\quad " + r"M_{ij}=\begin{cases}0 & \text{allowed}\\"
             r"-\infty & \text{masked (future token or padding)}\end{cases}")
    caption(words)
    if trace.causal:
        st.markdown("**Causal mask**: a decoder token may not look at later tokens, so M is −∞ above the diagonal "
                    "and those weights are exactly 0 after the softmax.")
    if any(trace.padding):
        pads = dict.fromkeys(t for t, p in zip(trace.key_tokens, trace.padding) if p)  # the token it pads with
        st.markdown(f"**Padding mask**: {sum(trace.padding)} padding key(s) "
                    f"({', '.join(f'“{md(t)}”' for t in pads)}, the token this tokenizer pads with) get −∞ "
                    "(attention_mask = 0), so no real token attends to them; the padding rows themselves are computed "
                    "but ignored.")
    if not trace.causal and not any(trace.padding):
        st.markdown("This encoder attends in both directions: M is all zeros (add padding above to see −∞ columns).")


def compare_view(loaded, trace, stream: str, layer: int, head: int, token: int, labels: list[str]) -> None:
    """Where the same word looks in two sentences ("…too tired" / "…too wide")."""
    theme = settings.theme()
    partner = compare_default(loaded.adapter) or c.params["text2"].default  # a causal model: its own pair's
    follow_default("text2", partner)
    other = c.text_input("text2", partner)
    trace_b = probe(attention_trace, loaded, other, "", stream, 0)  # the same model as the first sentence's
    if not trace_b.tokens:
        st.warning(md_message(trace_b.notes[0] if trace_b.notes else "Type a second sentence."))
    else:
        q_idx = token if token >= 0 else default_query(trace.tokens, trace.special)
        word = trace.tokens[q_idx]
        j = find_token(trace_b.tokens, word)  # tokens as shown: find_token reads the space mark
        if j < 0:
            j = default_query(trace_b.tokens, trace_b.special)
            st.info(f"“{md(labels[q_idx])}” is not in the second sentence; showing “{md(trace_b.tokens[j])}” "
                    "there.")
        lb = min(layer, trace_b.n_layers - 1)
        show(viz.compare_bars(trace.tokens, head_row(trace, layer, head, q_idx), trace_b.tokens,
                              head_row(trace_b, lb, head, j),
                              f"Where “{plotly_text(labels[q_idx])}” looks, layer {layer}, head {head}: "
                              f"A (left) vs B (right)", theme),
             OWN, key="compare_bars", filename="attention-compare", fold=380)
        c1, c2 = st.columns(2)
        with c1:
            show(viz.head_heatmap(head_matrix(trace, layer, [head]), trace.tokens, trace.key_tokens,
                                  "A", theme, highlight=q_idx), OWN, key="compare_a", filename="attention-compare-a",
                 share=0.5)
        with c2:
            show(viz.head_heatmap(head_matrix(trace_b, lb, [head]), trace_b.tokens,
                                  trace_b.key_tokens, "B", theme, highlight=j), OWN, key="compare_b",
                 filename="attention-compare-b", share=0.5)


def notices(loaded: LoadedModel, example: str, notice: AttentionNotice | None, stream: str) -> list[str]:
    """What to notice, computed on the model's own example sentence and its pronoun pair (a causal model gets the
    pair whose deciding word comes before "it"; a built-in's generated English has none: no pair point)."""
    pronouns = pronoun_pair(loaded.adapter)
    shift = probe(pronoun_shift, loaded, *pronouns, *PRONOUN, stream) if pronouns else None
    points = [] if notice is None else _example_points(example, notice)
    if pronouns is not None and shift is not None:
        points.append(_pronoun_point(pronouns, shift, notice is not None and notice.causal))
    return points


ON = "on that example"


def _example_points(example: str, notice: AttentionNotice) -> list[str]:
    points = [f"Rows sum to 1: each query token distributes one unit of attention over the keys (on the example "
              f"“{md(example)}”, the first under Examples: to within {notice.row_error:.1e})."]
    if notice.above is not None:
        points.append(f"This model is causal: the weights above the diagonal are exactly 0 (the largest {ON}: "
                      f"{notice.above:.1g}), the −∞ mask hides later tokens." if notice.causal else
                      f"This model attends both ways: nothing is masked above the diagonal (the largest weight there "
                      f"{ON}: {notice.above:.3f}); a causal decoder's would be exactly 0.")
    if notice.specials:
        points.append(f"{notice.special_heads} of the {notice.n_heads} heads give their largest weight (averaged over "
                      f"the query tokens) to a special token ({', '.join(f'“{md(t)}”' for t in notice.specials)}) "
                      f"{ON}, a 'no-op'; hide special tokens to see the rest (rows are renormalised, the caption says "
                      "by how much).")
    else:
        points.append(f"The tokenizer adds no special token here: {notice.first_heads} of the {notice.n_heads} heads "
                      f"give their largest weight (averaged over the query tokens) to the first token, "
                      f"“{md(notice.first)}”, {ON} (an attention sink); hiding special tokens changes nothing.")
    if notice.rollout is not None and notice.n_layers > 1:
        r0, r1 = notice.rollout
        points.append(f"Rollout mixes the residual path (½ I) with the heads' mean: {ON} a row's largest weight "
                      f"averages {r0:.2f} at layer 0 and {r1:.2f} at layer {notice.n_layers - 1}, so deeper layers "
                      + ("gather the weight on a few tokens" if r1 > r0 else "spread the weight out")
                      + f" (most rows of the last weigh “{md(notice.rollout_key)}” most).")
    return points


def _pronoun_point(pronouns: tuple[str, str], shift: PronounShift, causal: bool) -> str:
    lead = f"Compare “{md(pronouns[0])}” with “{md(pronouns[1])}” (both under Examples)"
    if shift.shift_at is None:
        return (f"{lead}: no head shifts “{shift.word}” from “{shift.first}” to “{shift.second}”; the largest "
                f"change of one weight of its row is {shift.change:.3f}.")
    (wa1, wa2), (wb1, wb2) = shift.weights_a, shift.weights_b
    return (f"{lead}: in layer {shift.shift_at[0]}, head {shift.shift_at[1]} “{shift.word}” gives "
            f"“{shift.first}” {wa1:.3f} and “{shift.second}” {wa2:.3f} in the first, {wb1:.3f} and "
            f"{wb2:.3f} in the second: it shifts from “{shift.first}” to “{shift.second}” "
            f"({shift.n_shift} of {shift.n_heads} heads do)."
            + (f" A causal model reads only the words before “{shift.word}”: here the deciding word comes "
               "before it." if causal else ""))
