"""Self-attention's presenter: an AttentionTrace (attentions: L, H, Tq, Tk) and the view's settings -> the head view
and the model view (with a second model beside it), the step-by-step arithmetic, the masks, or two sentences
compared; and what to notice on the model's own example sentence."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.self_attention import (AttentionNotice, AttentionShape, AttentionTrace, PronounShift,
                                            Showcase, compare_mismatch, default_query, find_token, head_matrix,
                                            head_row, hide_special, step_by_step)
from explorer.text.escape import latex_text, plotly_text
from explorer.viz import self_attention as viz
from explorer.viz.theme import Theme
from explorer.viz.tokens import strongest, vector_text

MODES = {"head": "Head view", "model": "All heads", "steps": "Step by step",  # short: whole at a projector's
         "masks": "Masks", "compare": "Two sentences"}                            # font in their narrow box
AGGS = {"heads": "chosen head(s)", "mean": "mean over heads", "max": "max over heads",
        "rollout": "rollout (layers 0…l)"}
SECOND_TEXT = {"segment": "Second sentence (optional: joined to the first by [SEP], segment B)",
               "target": "Decoder text (the target the decoder reads; empty = the same text)"}


def layer_label(i: int) -> str:
    return f"layer {i}"


def head_label(i: int) -> str:
    return f"head {i}"


OWN = Origin("model", "the model's own attention weights on this run (eager attention).")


def present(trace: AttentionTrace, mode: str, layer: int, heads: Sequence[int], how: str, token: int, hide: bool,
            theme: Theme, other: AttentionTrace | None = None,
            second: AttentionTrace | None = None) -> Presentation:
    """The view for `mode` ("head", "model", "steps", "masks", "compare"). heads: the head shown first, then any more
    averaged with it; token: the query token (-1: all); other: a second model's trace of the same sentence (head and
    model modes: A | B | B − A); second: the same model's trace of a second sentence ("compare")."""
    p = Presentation()
    p.say("note", *trace.notes)
    if not trace.tokens:
        return p
    if mode in ("head", "model"):
        _maps(p, trace, mode, layer, list(heads), how, token, hide, theme, other)
    elif mode == "steps":
        _steps(p, trace, layer, heads[0], token, theme)
    elif mode == "masks":
        _masks(p, trace, layer, heads[0], theme)
    elif mode == "compare" and second is not None:
        _two_sentences(p, trace, second, layer, heads[0], token, theme)
    if mode != "steps":
        labels = viz.display_tokens(trace.tokens)
        if 0 <= token < len(trace.tokens):
            weight, key, total = strongest(trace.attentions[layer, heads[0], token], trace.key_tokens)
            p.say("caption", f"Live: layer {layer}, head {heads[0]}: “{labels[token]}” gives its largest weight "
                             f"a = {weight:.4f} to “{key}”; its row sums to {total:.6f}.")
        if not trace.has_arithmetic and trace.arithmetic_note:
            p.say("caption", trace.arithmetic_note)
    return p


def shown(trace: AttentionTrace, matrix: np.ndarray, hide: bool
          ) -> tuple[np.ndarray, tuple[int, ...] | None, tuple[int, ...] | None, str]:
    """The (Tq', Tk') matrix as displayed (special tokens hidden or not), its rows and columns (None: all), and the
    note about the renormalisation ("" when nothing was hidden)."""
    if not hide:
        return matrix, None, None, ""
    hidden = hide_special(matrix, trace.special, trace.key_special)
    note = ""
    if hidden.renormalised:
        both = zip((*trace.tokens, *trace.key_tokens), (*trace.special, *trace.key_special))
        names = dict.fromkeys(t for t, s in both if s)  # this model's own, as shown
        note = (f"Special tokens hidden ({', '.join(f'“{t}”' for t in names)}): each remaining row was "
                f"renormalised to sum to 1 (the hidden tokens held {hidden.removed_mass:.1%} of a row's weight on "
                "average).")
    return hidden.matrix, hidden.rows, hidden.cols, note


def _pick(seq: Sequence[str], idx: tuple[int, ...] | None) -> list[str]:
    return [seq[i] for i in idx] if idx is not None else list(seq)


def _maps(p: Presentation, trace: AttentionTrace, mode: str, layer: int, heads: list[int], how: str, token: int,
          hide: bool, theme: Theme, other: AttentionTrace | None) -> None:
    """Head view (heatmap + line view) or model view (layers × heads grid + the chosen head enlarged), and a second
    model's map with the difference beside the first when `other` is given and comparable."""
    H, T = trace.n_heads, len(trace.tokens)
    head = heads[0]
    if other is not None and (why := compare_mismatch(trace, other, layer, heads)):
        p.say("note", f"{other.model_id} is not compared with {trace.model_id} here: {why}.")
        other = None
    if how == "rollout" and trace.rollout is None:
        p.say("note", "Rollout is defined for self-attention (queries and keys from the same sequence).")
        how = "heads"
    if mode == "model":
        side = trace.thumbnails.shape[-1]
        p.figure("model_view", viz.model_view(trace.thumbnails, T, trace.stream_label, theme, selected=(layer, head)),
                 Origin("model", "the model's own attention weights" + (f", each {T}×{T} map max-pooled to "
                                                                         f"{side}×{side}." if side < T else ".")),
                 "attention-model-view")
        p.say("caption", "Pick a layer and head above to enlarge it below at full resolution.")
    what = {"heads": f"layer {layer}, head {head}" if len(heads) == 1 else
            f"layer {layer}, mean of heads {', '.join(map(str, heads))}",
            "mean": f"layer {layer}, mean over {H} heads", "max": f"layer {layer}, max over {H} heads (rows need "
            "not sum to 1)", "rollout": f"attention rollout through layers 0…{layer}"}[how]
    z, rows, kcols, hidden_note = shown(trace, head_matrix(trace, layer, heads, how), hide)
    origin = Origin("model", {"heads": "the model's own attention weights", "mean": "the mean over heads of the "
                              "model's own weights", "max": "the max over heads of the model's own weights",
                              "rollout": "attention rollout (Abnar & Zuidema 2020) computed from the model's own "
                              "weights"}[how] + (", special tokens hidden and rows renormalised." if rows is not None
                                                 else "."))
    q_tok, k_tok = _pick(trace.tokens, rows), _pick(trace.key_tokens, kcols)
    row = None
    if token >= 0:
        row = token if rows is None else (rows.index(token) if token in rows else None)
    zmax = None if how == "max" else 1.0
    heatmap = viz.head_heatmap(z, q_tok, k_tok, what if other is None else f"A: {plotly_text(trace.model_id)}",
                               theme, zmax=zmax, rows=rows, cols=kcols, highlight=row)
    if other is None:
        p.figure("head_heatmap", heatmap, origin, f"attention-L{layer}-H{head}")
    else:
        z_b = shown(other, head_matrix(other, layer, heads, how), hide)[0]
        p.row(("head_heatmap", heatmap, origin, f"attention-L{layer}-H{head}"),
              ("head_heatmap_b", viz.head_heatmap(z_b, q_tok, k_tok, f"B: {plotly_text(other.model_id)}", theme,
                                                  zmax=zmax, rows=rows, cols=kcols), OWN,
               f"attention-L{layer}-compare"),
              ("head_heatmap_diff", viz.difference_heatmap(z, z_b, q_tok, k_tok, "B − A", theme),
               Origin("model", "the difference of the two models' own attention weights on this sentence."),
               f"attention-L{layer}-difference"))
        compared = f"layer {layer}, head {head}" if how == "heads" and len(heads) == 1 else f"layer {layer}, {how}"
        p.say("caption", f"{compared}: "
                         f"A = {trace.model_id}, B = {other.model_id}, both on the same scale (weights 0 … 1); "
                         f"largest |B − A|: {viz.largest_difference(z, z_b):.3f}.")
    if token >= 0 and row is None:
        p.say("caption", f"The selected token “{viz.display_tokens(trace.tokens)[token]}” is hidden (special "
                         "token).")
    p.say("caption", hidden_note)
    if mode == "head":
        if T > 60 and row is None:
            p.say("caption", f"{T} tokens: the line view draws the {viz.MAX_LINES:,} strongest lines; pick a query "
                             "token to isolate its row.")
        if how == "heads" and len(heads) > 1:
            mats = [shown(trace, head_matrix(trace, layer, [h]), hide)[0] for h in heads]
            names = [f"head {h}" for h in heads]
        else:
            mats, names = [z], [what]
        p.figure("line_view", viz.line_view(mats, names, q_tok, k_tok, theme, query=row, rows=rows, cols=kcols),
                 origin, f"attention-lines-L{layer}")


def _steps(p: Presentation, trace: AttentionTrace, layer: int, head: int, token: int, theme: Theme) -> None:
    """The lecture's table for one query: q·k, ÷√d, mask, softmax, a·v, from the layer's own weights."""
    q_idx = token if token >= 0 else default_query(trace.tokens, trace.special)
    steps = step_by_step(trace, layer, head, q_idx)
    if steps is None:
        p.say("warning", trace.arithmetic_note or "The Q/K/V arithmetic is not available for this model.")
        row_p = head_row(trace, layer, head, q_idx)
        p.table("row", {"key": viz.display_tokens(trace.key_tokens), "attention (model)": list(row_p)}, OWN)
        p.figure("steps_bars", viz.steps_figure(trace.key_tokens, None, row_p, trace.tokens[q_idx], theme), OWN,
                 f"attention-row-L{layer}-H{head}")
        return
    j = steps.top
    kt = [latex_text(t) for t in viz.display_tokens(steps.key_tokens)]
    qt = viz.display_tokens([steps.query_token])[0]
    scaled = rf"\tfrac{{q\cdot k}}{{\sqrt{{{steps.d}}}}}" if steps.standard_scale else rf"{steps.scale:.5f}\,q\cdot k"
    bias = rf",\ b={steps.bias[j]:.4f}" if steps.bias is not None else ""
    arithmetic = Origin("recomputed", f"from the layer's own Q, K, V in float64: the softmax equals the model's "
                                      f"attention to {steps.max_error:.1e}.")
    weight = (rf"a=\tfrac{{e^{{{steps.scaled[j] - steps.max_logit:.3f}}}}}{{{steps.denominator:.4f}}}"
              rf"={steps.probs[j]:.5f}" if steps.bias is None and not steps.softcap else rf"a={steps.probs[j]:.5f}")
    p.say("latex", viz.steps_formula(steps),
          rf"\text{{“{latex_text(qt)}”}}\to\text{{“{kt[j]}”}}:\ q\cdot k={steps.dots[j]:.4f},\ "
          rf"{scaled}={steps.scaled[j]:.4f}{bias},\ {weight}")
    p.figure("steps_bars", viz.steps_figure(steps.key_tokens, steps.logits, steps.probs, steps.query_token, theme),
             arithmetic, f"attention-steps-L{layer}-H{head}")
    scale_txt = (f"1/√{steps.d} = {steps.scale:.5f}" if steps.standard_scale
                 else f"{steps.scale:.5f} (this model's scaling)")
    p.say("line", f"Layer {layer}, head {head}, query “{qt}” (token {q_idx}); head size d = {steps.d}; scale "
                  f"{scale_txt}. Q, K, V are what the model's attention multiplied (read from its run); the "
                  f"recomputed softmax equals the model's attention to {steps.max_error:.1e}.",
          *viz.steps_notes(steps))
    if steps.angles is not None:
        p.table("rope", viz.rope_table(steps), Origin("recomputed", f"the query's rotation with the model's own "
                                                                    f"cos/sin, equal to its q to "
                                                                    f"{steps.rope_error:.1e}."))
    p.say("line", f"q (first dims of {steps.d}): " + vector_text(steps.q))
    p.table("steps", viz.steps_table(steps), arithmetic)
    p.say("line", "z = Σ a·v (first dims): " + vector_text(steps.z))


def _masks(p: Presentation, trace: AttentionTrace, layer: int, head: int, theme: Theme) -> None:
    """The mask M drawn explicitly (causal −∞ triangle, padding columns) and the weights after the softmax."""
    scaled, words = viz.scale_tex(trace.scaling, trace.head_size)
    p.row(("mask", viz.mask_figure(trace.mask, trace.tokens, trace.key_tokens, "The mask M", theme),
           Origin("model", "the additive mask this run used."), "attention-mask"),
          ("masked_heatmap", viz.head_heatmap(head_matrix(trace, layer, [head]), trace.tokens, trace.key_tokens,
                                              f"After the softmax: layer {layer}, head {head}", theme),
           Origin("model", "the model's own weights on this run."), f"attention-masked-L{layer}-H{head}"))
    p.say("latex", rf"\mathrm{{softmax}}\Big({scaled} + M\Big),\quad " + r"M_{ij}=\begin{cases}0 & \text{allowed}\\"
          r"-\infty & \text{masked (future token or padding)}\end{cases}")
    p.say("caption", words)
    if trace.causal:
        p.say("line", "Causal mask: a decoder token may not look at later tokens, so M is −∞ above the diagonal "
                      "and those weights are exactly 0 after the softmax.")
    if any(trace.padding):
        pads = dict.fromkeys(t for t, pad in zip(trace.key_tokens, trace.padding) if pad)  # what it pads with
        p.say("line", f"Padding mask: {sum(trace.padding)} padding key(s) ({', '.join(f'“{t}”' for t in pads)}, "
                      "the token this tokenizer pads with) get −∞ (attention_mask = 0), so no real token attends to "
                      "them; the padding rows themselves are computed but ignored.")
    if not trace.causal and not any(trace.padding):
        p.say("line", "This encoder attends in both directions: M is all zeros (add padding above to see −∞ "
                      "columns).")


def _two_sentences(p: Presentation, trace: AttentionTrace, second: AttentionTrace, layer: int, head: int,
                   token: int, theme: Theme) -> None:
    """Where the same word looks in two sentences ("…too tired" / "…too wide")."""
    if not second.tokens:
        p.say("warning", second.notes[0] if second.notes else "Type a second sentence.")
        return
    labels = viz.display_tokens(trace.tokens)
    q_idx = token if token >= 0 else default_query(trace.tokens, trace.special)
    j = find_token(second.tokens, trace.tokens[q_idx])  # tokens as shown: find_token reads the space mark
    if j < 0:
        j = default_query(second.tokens, second.special)
        p.say("note", f"“{labels[q_idx]}” is not in the second sentence; showing “{second.tokens[j]}” there.")
    lb = min(layer, second.n_layers - 1)
    p.figure("compare_bars", viz.compare_bars(trace.tokens, head_row(trace, layer, head, q_idx), second.tokens,
                                              head_row(second, lb, head, j),
                                              f"Where “{plotly_text(labels[q_idx])}” looks, layer {layer}, head "
                                              f"{head}: A (left) vs B (right)", theme), OWN, "attention-compare")
    p.row(("compare_a", viz.head_heatmap(head_matrix(trace, layer, [head]), trace.tokens, trace.key_tokens, "A",
                                         theme, highlight=q_idx), OWN, "attention-compare-a"),
          ("compare_b", viz.head_heatmap(head_matrix(second, lb, [head]), second.tokens, second.key_tokens, "B",
                                         theme, highlight=j), OWN, "attention-compare-b"))


ON = "on that example"


def notices(example: str, notice: AttentionNotice | None, shift: PronounShift | None) -> list[str]:
    """What to notice, computed on the model's own example sentence (`notice`) and its pronoun pair (`shift`:
    probes.self_attention.pronoun_example; None: the model has no pair)."""
    points = [] if notice is None else _example_points(example, notice)
    if shift is not None:
        points.append(_pronoun_point(shift, notice is not None and notice.causal))
    return points


def header(shape: AttentionShape, showcase: Showcase | None, mode: str) -> Presentation:
    """What the page says under the sentence's charts: the model, its attention stream and the head the view opened
    on, and (but for the step-by-step mode, which writes its own) the attention formula with this model's scaling."""
    p = Presentation()
    p.say("caption", f"{shape.model_id} · {shape.adapter} · {shape.stream_label} · {shape.n_layers} layers × "
                     f"{shape.n_heads} heads" + (" · causal (decoder)" if shape.causal else "")
          + (f" · the view opens on layer {showcase.layer}, head {showcase.head}: {showcase.rule} on the example "
             f"“{showcase.text}”" if showcase is not None else ""))
    if mode != "steps":
        scaled, words = viz.scale_tex(shape.scaling, shape.head_size)
        p.say("latex", rf"\mathrm{{Attention}}(Q,K,V)=\mathrm{{softmax}}\Big({scaled}+M\Big)V"
              r"\qquad\text{rollout: }\tilde A_l=\mathrm{rownorm}(\tfrac12 A_l+\tfrac12 I),\ R_l=\tilde A_l R_{l-1}")
        p.say("caption", words)
    return p


def query_menu(trace: AttentionTrace) -> tuple[list[int], int, dict[int, str]]:
    """The query-token menu: its options (-1: all query tokens, then each token), the one it opens on ("it" or the
    last word) and each option's label."""
    shown = viz.display_tokens(trace.tokens)
    labels = {-1: "all query tokens", **{i: f"query {i}: {t}" for i, t in enumerate(shown)}}
    return list(labels), default_query(trace.tokens, trace.special), labels


def _example_points(example: str, notice: AttentionNotice) -> list[str]:
    points = [f"Rows sum to 1: each query token distributes one unit of attention over the keys (on the example "
              f"“{example}”, the first under Examples: to within {notice.row_error:.1e})."]
    if notice.above is not None:
        points.append(f"This model is causal: the weights above the diagonal are exactly 0 (the largest {ON}: "
                      f"{notice.above:.1g}), the −∞ mask hides later tokens." if notice.causal else
                      f"This model attends both ways: nothing is masked above the diagonal (the largest weight there "
                      f"{ON}: {notice.above:.3f}); a causal decoder's would be exactly 0.")
    if notice.specials:
        points.append(f"{notice.special_heads} of the {notice.n_heads} heads give their largest weight (averaged over "
                      f"the query tokens) to a special token ({', '.join(f'“{t}”' for t in notice.specials)}) "
                      f"{ON}, a 'no-op'; hide special tokens to see the rest (rows are renormalised, the caption says "
                      "by how much).")
    else:
        points.append(f"The tokenizer adds no special token here: {notice.first_heads} of the {notice.n_heads} heads "
                      f"give their largest weight (averaged over the query tokens) to the first token, "
                      f"“{notice.first}”, {ON} (an attention sink); hiding special tokens changes nothing.")
    if notice.rollout is not None and notice.n_layers > 1:
        r0, r1 = notice.rollout
        points.append(f"Rollout mixes the residual path (½ I) with the heads' mean: {ON} a row's largest weight "
                      f"averages {r0:.2f} at layer 0 and {r1:.2f} at layer {notice.n_layers - 1}, so deeper layers "
                      + ("gather the weight on a few tokens" if r1 > r0 else "spread the weight out")
                      + f" (most rows of the last weigh “{notice.rollout_key}” most).")
    return points


def _pronoun_point(shift: PronounShift, causal: bool) -> str:
    lead = f"Compare “{shift.sentences[0]}” with “{shift.sentences[1]}” (both under Examples)"
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
