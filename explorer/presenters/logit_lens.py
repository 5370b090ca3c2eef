"""The logit lens's presenter: a LensTrace (top_probs, final_prob, final_rank: L layers × T positions; each layer's
top-k tokens at each position) and the chosen layer and position -> the layers × positions grid (every few layers of a
deep model, all of them apart), a second model's grid and the probability it gives the first model's prediction
(B − A), the chosen cell's top-k bars, and what to notice."""
from __future__ import annotations

import numpy as np

from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.logit_lens import LensTrace
from explorer.text.escape import md, plotly_text
from explorer.viz import logit_lens as viz
from explorer.viz.theme import Theme


def position_label(trace: LensTrace, t: int) -> str:
    """The position menu's label of token t."""
    return f"after token {t}: {trace.tokens[t]}"


def layer_label(trace: LensTrace, i: int) -> str:
    """The layer menu's label of layer i."""
    return f"top 10 after {trace.layers[i]}"


def head(trace: LensTrace) -> Presentation:
    """What the page says above its controls: the probe's notes about the input."""
    p = Presentation()
    p.say("note", *trace.notes)
    return p


def own(trace: LensTrace) -> Origin:
    return Origin("model", f"each layer's hidden state through {md(trace.model_id)}'s own final norm and output "
                           f"layer; the last layer ({trace.layers[-1]}) equals the model's own logits to "
                           f"{trace.lens_error:.1e}.")


def comparable(trace: LensTrace, other: LensTrace) -> bool:
    """Whether a second model reads the sentence as the same tokens through as many layers (then the probability it
    gives the first model's prediction can be read: explorer.probes.logit_lens.probability_of)."""
    return other.tokens == trace.tokens and len(other.layers) == len(trace.layers)


def present(trace: LensTrace, layer: int, pos: int, theme: Theme, other: LensTrace | None = None,
            other_id: str = "", tracked: np.ndarray | None = None, failed: str = "") -> Presentation:
    """The view at `layer` and position `pos`: the grid ("lens_grid"), a second model's ("lens_grid_b", `other`;
    failed: why it could not be read) with the difference of the probability it gives the first model's prediction
    ("lens_diff", from `tracked` (L, T): explorer.probes.logit_lens.probability_of), the cell's top-k bars
    ("lens_bars") and what they say."""
    p = Presentation()
    L = len(trace.layers)
    rows = viz.grid_rows(L, layer)  # a deep model: every k-th layer and the selected one in the first screen
    p.figure("lens_grid", viz.lens_grid(trace, theme, (layer, pos), rows), own(trace), "logit-lens")
    if failed:
        p.say("warning", f"{other_id} cannot be compared here: {failed}")
    elif other is not None:
        p.figure("lens_grid_b", viz.lens_grid(other, theme, (layer, pos) if layer < len(other.layers) else None,
                                              named=True),
                 Origin("model", f"each layer's hidden state through {md(other_id)}'s own final norm and output "
                                 "layer."), "logit-lens-compare")
        if tracked is None:
            p.say("note", f"No difference is drawn: {other_id} and {trace.model_id} do not read this sentence as the "
                          "same tokens through the same number of layers and vocabulary.")
        else:
            p.figure("lens_diff", viz.tracked_difference(trace, tracked, other_id, theme),
                     Origin("model", "the difference of the two models' own lens probabilities of the first model's "
                                     "prediction at each position."), "logit-lens-difference")
            p.say("caption", f"Both grids on one colour scale (p from 0 to 1). The difference follows "
                             f"{trace.model_id}'s own prediction at each position (the hover names it): the "
                             f"probability {other_id} gives it after each layer minus {trace.model_id}'s; largest "
                             f"|B − A|: {viz.tracked_gap(trace, tracked):.3f}.")
    tokens, probs = trace.bars(layer, pos)
    final = trace.final_tokens[pos]
    p.figure("lens_bars", viz.lens_bars(tokens, probs, f"After {trace.layers[layer]}, next after "
                                                       f"“{plotly_text(trace.tokens[pos])}”: top {len(tokens)}",
                                        theme, mark=final), own(trace), "logit-lens-bars")
    p.say("caption", f"The model's own prediction after “{trace.tokens[pos]}” is “{final}”: after "
                     f"{trace.layers[layer]} it ranks {int(trace.final_rank[layer, pos]) + 1} with p = "
                     f"{trace.final_prob[layer, pos]:.4f} (outlined when in the top {len(tokens)}). "
                     f"{viz.numbering(trace.layers)}")
    if len(rows) < L:
        p.say("caption", f"The grid shows {len(rows)} of the {L} layers: {', '.join(trace.layers[i] for i in rows)} "
                         "(every few layers, counted down from the output, and the chosen one); all of them are "
                         "below.")
    return p


def all_layers(trace: LensTrace, layer: int, pos: int, theme: Theme) -> tuple[str, Presentation]:
    """The grid of every layer ("lens_grid_all") where the main grid shows only some, and the title of the section
    that holds it (an empty presentation when the main grid shows them all)."""
    p = Presentation()
    L = len(trace.layers)
    if len(viz.grid_rows(L, layer)) < L:
        p.figure("lens_grid_all", viz.lens_grid(trace, theme, (layer, pos)), own(trace), "logit-lens-all-layers")
    return f"All {L} layers", p


def notices(trace: LensTrace, pos: int) -> list[str]:
    """What to notice, read from the column of position `pos` (computed, not a general rule)."""
    final = trace.final_tokens[pos]
    enters = trace.first_in_top(pos)
    if len(trace.layers) > 1:
        column = (f"Read a column bottom to top: after “{trace.tokens[pos]}” the model's own prediction, “{final}”, "
                  f"ranks {int(trace.final_rank[0, pos]) + 1} after {trace.layers[0]} (whose top guess is "
                  f"“{trace.top_tokens[0][pos]}”) and "
                  + (f"enters the top 10 after {trace.layers[enters]} (rank {int(trace.final_rank[enters, pos]) + 1})."
                     if enters is not None else "stays out of the top 10 until the output.")
                  + " The layers in between show how it settles on its choice.")
    else:
        column = (f"This model has one layer: the lens has one row, {trace.layers[0]}, which is the model's own "
                  "output; a deeper model shows its prediction forming layer by layer.")
    return [column,
            "The hover gives the rank of the model's final prediction after every layer: how early it 'knows' the "
            "answer.",
            f"The top row ({trace.layers[-1]}) is the model's output: it equals the model's own logits to "
            f"{trace.lens_error:.1e} (the chart's badge prints the same difference)."]
